package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// Setup decides once, at daemon start, whether runs get cgroups. mode is
// program.CgroupAuto (or ""), program.CgroupOff or an absolute directory
// DIR; id is statedir.ID of the state directory. The daemon's subtree is
// tend-ID in tend's own group (auto) or in DIR.
//
// It returns (tree, "", nil) when cgroups are used; (nil, why, nil) when
// not, why being one line a person can act on; an error only for an
// explicit directory that cannot be used (missing, not inside a cgroup2
// mount, in a v1 hierarchy, not writable, ...): a *ConfigError, which
// wraps program.ErrBadConfig.
//
// Setup is idempotent: a restarted daemon finds tend-ID and its groups
// again, and never empties them (they may hold runs to adopt).
func Setup(mode, id string) (*Tree, string, error) {
	return SetupAt(mode, id, "/proc/self/mountinfo", "/proc/self/cgroup")
}

// SetupAt is Setup reading the given mountinfo and /proc/self/cgroup files
// (tests hand it a fake cgroupfs directory and fake files).
func SetupAt(mode, id, mountinfo, selfCgroup string) (*Tree, string, error) {
	switch mode {
	case program.CgroupOff:
		return nil, `cgroup = "off"`, nil
	case program.CgroupAuto, "":
		if why := cloneIntoCgroup(); why != "" {
			return nil, why, nil
		}
		t, why := setupAuto(id, mountinfo, selfCgroup)
		return t, why, nil
	}
	if why := cloneIntoCgroup(); why != "" {
		return nil, "", badConfig("%s", why)
	}
	t, err := setupDir(mode, id, mountinfo)
	return t, "", err
}

// cloneIntoCgroup says why this kernel cannot place a child in a group at
// fork (clone3 CLONE_INTO_CGROUP came in Linux 5.7), or "".
func cloneIntoCgroup() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "" // let the fork say
	}
	rel := unix.ByteSliceToString(u.Release[:])
	if !kernelAtLeast(rel, 5, 7) {
		return "Linux " + rel + " cannot place a process in a cgroup at fork (clone3 CLONE_INTO_CGROUP needs 5.7)"
	}
	return ""
}

// kernelAtLeast compares a release such as "6.18.44-fc" with major.minor;
// one it cannot read passes.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}

func newTree(dir string, controllers []string, off map[string]string, why, leaf string) *Tree {
	return &Tree{path: dir, controllers: controllers, off: off, why: why, leaf: leaf, w: newWatcher()}
}

// setupAuto finds tend's own group OWN and makes OWN/tend-ID, or, when
// OWN is the cgroup of the systemd service tend was started as, the same
// in a scope of its own beside OWN (scope.go says why).
func setupAuto(id, mountinfo, selfCgroup string) (*Tree, string) {
	if !validID(id) {
		return nil, fmt.Sprintf("bad state directory id %q", id)
	}
	data, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil, fmt.Sprintf("cannot read %s: %v", mountinfo, err)
	}
	ms, err := parseMountinfo(data)
	if err != nil {
		return nil, fmt.Sprintf("cannot parse %s: %v", mountinfo, err)
	}
	data, err = os.ReadFile(selfCgroup)
	if err != nil {
		return nil, fmt.Sprintf("cannot read %s: %v", selfCgroup, err)
	}
	own, ok := parseSelfCgroup(data)
	if !ok {
		return nil, fmt.Sprintf("no cgroup v2 entry (0::) in %s", selfCgroup)
	}
	if !path.IsAbs(own) || path.Clean(own) != own || strings.HasSuffix(own, " (deleted)") {
		return nil, fmt.Sprintf("tend's cgroup %q (from %s) is outside this cgroup namespace", own, selfCgroup)
	}
	var v2 []mount
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			v2 = append(v2, m)
		}
	}
	if len(v2) == 0 {
		return nil, fmt.Sprintf("no cgroup2 mount in %s", mountinfo)
	}
	// A restarted daemon that re-executed itself is still in its leaf:
	// OWN is two levels up.
	if path.Base(own) == daemonLeaf && path.Base(path.Dir(own)) == "tend-"+id {
		own = path.Dir(path.Dir(own))
	}
	dir := ""
	for _, m := range v2 {
		if rel, ok := within(own, path.Clean(m.Root)); ok {
			d := path.Join(m.Point, rel)
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				dir = d
				break
			}
		}
	}
	if dir == "" {
		return nil, fmt.Sprintf("tend's cgroup %s (from %s) is not in any cgroup2 mount (%s)", own, selfCgroup, mountPoints(v2))
	}
	if svc := serviceOf(own); svc != "" {
		return underService(dir, own, svc, id, ms)
	}
	return subtree(dir, id, ms, true)
}

// setupDir checks the directory cgroup = DIR names, and makes the daemon's
// subtree DIR/tend-ID in it, exactly as auto makes OWN/tend-ID, except that
// the daemon stays where it is. DIR must exist: tend makes nothing in it
// but its own subtree, and so never has a reason to remove DIR.
func setupDir(dir, id, mountinfo string) (*Tree, error) {
	if !filepath.IsAbs(dir) {
		return nil, badConfig("%q is not an absolute path", dir)
	}
	if !validID(id) {
		return nil, badConfig("bad state directory id %q", id)
	}
	dir = filepath.Clean(dir)
	data, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil, badConfig("cannot read %s: %v", mountinfo, err)
	}
	ms, err := parseMountinfo(data)
	if err != nil {
		return nil, badConfig("cannot parse %s: %v", mountinfo, err)
	}
	real, err := resolve(dir)
	if err != nil {
		return nil, badConfig("%s: %v", dir, err)
	}
	m, ok := mountOf(ms, real)
	switch {
	case ok && m.FSType == "cgroup":
		return nil, badConfig("%s is in a cgroup v1 hierarchy (%s, mounted at %s); tend needs a directory in a cgroup2 mount%s",
			dir, strings.Join(v1Controllers(m), ","), m.Point, v2Hint(ms))
	case !ok || m.FSType != "cgroup2":
		on := "no mount"
		if ok {
			on = m.FSType + " mounted at " + m.Point
		}
		return nil, badConfig("%s is not inside a cgroup2 mount (it is on %s)%s", dir, on, v2Hint(ms))
	}
	fi, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, badConfig("%s does not exist: tend makes its own group inside this directory (tend-%s), not the directory itself", dir, id)
	case err != nil:
		return nil, badConfig("%s: %v", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return nil, badConfig("%s is not a directory", dir)
	}
	if err := unix.Access(real, unix.W_OK); err != nil {
		return nil, badConfig("%s is not writable: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(real, "cgroup.procs")); err != nil {
		return nil, badConfig("%s is not a cgroup (no cgroup.procs)", dir)
	}
	t, why := subtree(real, id, ms, false)
	if t == nil {
		return nil, badConfig("%s", why)
	}
	return t, nil
}

// subtree makes PARENT/tend-ID, the daemon's own, and enables the wanted
// controllers for the groups below it, first in PARENT (which only adds to
// what PARENT's other children may enable) and then in tend-ID. With
// moveDaemon the daemon first moves itself into tend-ID/daemon, where that
// is needed for the controllers to be enabled. It returns the tree, or
// (nil, why) when tend-ID cannot be made.
func subtree(parent, id string, ms []mount, moveDaemon bool) (*Tree, string) {
	tdir := filepath.Join(parent, "tend-"+id)
	if err := unix.Mkdir(tdir, 0o755); err != nil && err != unix.EEXIST {
		return nil, cannotCreate(parent, err)
	}
	avail := readList(filepath.Join(parent, "cgroup.controllers"))

	var problems []string
	leaf := ""
	// The hierarchy's root has no cgroup.type and is exempt from the
	// no-internal-processes rule: nothing to move there. Anywhere else,
	// a namespace root included (tend as a container's init), controllers
	// can be enabled below OWN only once OWN holds no process.
	if _, err := os.Stat(filepath.Join(parent, "cgroup.type")); moveDaemon && err == nil && len(intersect(wanted, avail)) > 0 {
		l := filepath.Join(tdir, daemonLeaf)
		if err := unix.Mkdir(l, 0o755); err != nil && err != unix.EEXIST {
			problems = append(problems, fmt.Sprintf("cannot create the daemon's leaf %s: %v", l, err))
		} else if err := writeFile(filepath.Join(l, "cgroup.procs"), fmt.Sprint(os.Getpid())); err != nil {
			problems = append(problems, fmt.Sprintf("cannot move the daemon into %s: %v", l, err))
		} else {
			leaf = l
		}
	}
	parentOn, err := enable(parent, avail)
	if err != nil {
		problems = append(problems, enableWhy(parent, err))
	}
	ctl, err := enable(tdir, parentOn)
	if err != nil {
		problems = append(problems, enableWhy(tdir, err))
	}
	off := map[string]string{}
	for _, c := range wanted {
		if !slices.Contains(ctl, c) {
			off[c] = controllerWhy(ms, parent, avail, c, problems)
		}
	}
	why := strings.Join(problems, "; ")
	if why == "" {
		why = off["memory"]
	}
	return newTree(tdir, ctl, off, why, leaf), ""
}

// enable turns on the wanted controllers among avail in dir's
// cgroup.subtree_control, in one write (the kernel applies all or none),
// and returns what is enabled there.
func enable(dir string, avail []string) ([]string, error) {
	file := filepath.Join(dir, "cgroup.subtree_control")
	on := readList(file)
	var need []string
	for _, c := range intersect(wanted, avail) {
		if !slices.Contains(on, c) {
			need = append(need, c)
		}
	}
	if len(need) == 0 {
		return on, nil
	}
	if err := writeFile(file, "+"+strings.Join(need, " +")); err != nil {
		return on, err
	}
	on = append(on, need...)
	slices.Sort(on)
	return on, nil
}

func enableWhy(dir string, err error) string {
	if errors.Is(err, unix.EBUSY) {
		return fmt.Sprintf("cannot enable controllers in %s: other processes share that group (the no-internal-processes rule); run tend as a systemd service with Delegate=yes", dir)
	}
	return fmt.Sprintf("cannot enable controllers in %s: %v", dir, err)
}

// controllerWhy says why PARENT's groups cannot have controller c:
// the problems met enabling controllers, or what the host lacks.
func controllerWhy(ms []mount, parent string, avail []string, c string, problems []string) string {
	if len(problems) > 0 {
		return strings.Join(problems, "; ")
	}
	if slices.Contains(avail, c) {
		return "the " + c + " controller is not enabled for " + parent
	}
	for _, m := range ms {
		if m.FSType == "cgroup" && slices.Contains(m.Super, c) {
			return "no " + c + " controller: it is bound to the cgroup v1 hierarchy at " + m.Point
		}
	}
	return "no " + c + " controller: it is not delegated to " + parent + " (not in its cgroup.controllers)"
}

func cannotCreate(dir string, err error) string {
	switch {
	case errors.Is(err, unix.EROFS):
		return fmt.Sprintf("cannot create groups below %s: %v; give tend a writable cgroup2 mount (a container with its own cgroup namespace, or a systemd service with Delegate=yes)", dir, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Sprintf("cannot create groups below %s: %v; run tend as root or as a systemd service with Delegate=yes", dir, err)
	}
	return fmt.Sprintf("cannot create groups below %s: %v", dir, err)
}

// resolve follows the symbolic links of dir's deepest existing ancestor,
// so that the mount found for it is where it really is.
func resolve(dir string) (string, error) {
	rest := ""
	for p := dir; ; p = filepath.Dir(p) {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// mountPoints lists where the cgroup2 mounts are, for messages.
func mountPoints(ms []mount) string {
	var ps []string
	for _, m := range ms {
		ps = append(ps, m.Point)
	}
	return "cgroup2 is mounted at " + strings.Join(ps, ", ")
}

func v2Hint(ms []mount) string {
	var v2 []mount
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			v2 = append(v2, m)
		}
	}
	if len(v2) == 0 {
		return "; this host has no cgroup2 mount"
	}
	return "; " + mountPoints(v2)
}

func intersect(a, b []string) []string {
	var r []string
	for _, x := range a {
		if slices.Contains(b, x) {
			r = append(r, x)
		}
	}
	return r
}

// ConfigError is a cgroup = DIR that cannot be used: a config error, exit
// 2 at start. Error prefixes its message with the key, "daemon.cgroup: ".
type ConfigError struct {
	Msg string // what is wrong, without the key
}

func (e *ConfigError) Error() string { return "daemon.cgroup: " + e.Msg }
func (e *ConfigError) Unwrap() error { return program.ErrBadConfig }

func badConfig(format string, args ...any) error {
	return &ConfigError{fmt.Sprintf(format, args...)}
}

// validID reports whether id can name a daemon's subtree, tend-ID.
func validID(id string) bool { return id != "" && validName("tend-"+id) }
