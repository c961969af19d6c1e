// Package cgroup finds, creates, places into, kills and reads the cgroup v2
// groups that hold tend's runs (SPEC 12): one group per instance, "NAME-K",
// below a directory of the daemon's own, so that a run is every process it
// starts, whatever it does with sessions and forks.
//
// Setup decides once, at daemon start, whether runs get groups, and lays
// the tree out by the kernel's delegation rules (cgroup-v2.rst, systemd's
// Delegate=): the daemon moves itself into a leaf of its own, so that the
// groups above its runs hold no process and may have the memory, cpu and
// pids controllers enabled for them. A child is placed in its group at fork
// (clone3 with CLONE_INTO_CGROUP, through the directory descriptor that
// Group.Prepare returns), killed as a whole by cgroup.kill, and known to be
// gone when cgroup.events says "populated 0", which the Tree watches with
// one inotify descriptor on the shared epoll loop instead of polling.
//
// Only cgroup v2 is supported: tend never writes to a v1 hierarchy.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// daemonLeaf is the group the daemon moves itself into, beside its runs'.
const daemonLeaf = "daemon"

// wanted are the controllers enabled for runs' groups where available.
var wanted = []string{"cpu", "memory", "pids"}

// Tree is the directory holding one daemon's instance groups. Its fields
// are set by Setup and not changed afterwards; the watcher and made have
// their own locks.
type Tree struct {
	path        string   // OWN/tend-ID, or the explicit directory
	controllers []string // enabled in path's cgroup.subtree_control
	why         string   // what limits the tree ("" when the memory controller is on)
	leaf        string   // the daemon's leaf when Setup moved the daemon there, else ""
	w           *watcher
	kept        keptFiles // memory.current of each group, open for MemoryCurrent
	made        madeGroups
}

// madeGroups are the groups this Tree made that no cgroup.kill has reached
// since: Prepare may hand such a group, empty, to the next run as it is.
type madeGroups struct {
	mu   sync.Mutex // guards dirs
	dirs map[string]bool
}

func (m *madeGroups) set(dir string, clean bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !clean {
		delete(m.dirs, dir)
		return
	}
	if m.dirs == nil {
		m.dirs = map[string]bool{}
	}
	m.dirs[dir] = true
}

func (m *madeGroups) clean(dir string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dirs[dir]
}

// Setup decides once, at daemon start, whether runs get cgroups (SPEC 12).
// mode is program.CgroupAuto (or ""), program.CgroupOff or an absolute
// directory; id is statedir.ID of the state directory.
//
// It returns (tree, "", nil) when cgroups are used; (nil, why, nil) when
// not, why being one line a person can act on; an error only for an
// explicit directory that cannot be used (not inside a cgroup2 mount, in a
// v1 hierarchy, not writable, ...): it wraps program.ErrBadConfig and its
// message starts "daemon.cgroup: ".
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
	t, err := setupDir(mode, mountinfo)
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

// Path returns the directory holding the instance groups.
func (t *Tree) Path() string { return t.path }

// Controllers returns the controllers enabled for the instance groups
// (for example cpu memory pids), as cgroup.subtree_control lists them.
func (t *Tree) Controllers() []string { return slices.Clone(t.controllers) }

// HasMemory reports whether the memory controller is enabled for the
// instance groups: memory.current, memory.max and memory.events exist.
func (t *Tree) HasMemory() bool { return slices.Contains(t.controllers, "memory") }

// Why describes, in one line for tend doctor and the daemon started
// event, what the tree lacks: why the memory controller is not on, or why
// controllers could not be enabled. "" when the memory controller is on.
func (t *Tree) Why() string { return t.why }

// DaemonGroup returns the leaf Setup moved the daemon into, or "" when it
// left the daemon where it was (an explicit directory, a hierarchy root, a
// group without controllers to delegate).
func (t *Tree) DaemonGroup() string { return t.leaf }

// Names returns the instance groups present, sorted: a restarted daemon
// finds its own, and empties and removes those no longer configured. Only
// "NAME-K" directories are listed: never the daemon's leaf, nor a foreign
// group in an explicit directory.
func (t *Tree) Names() ([]string, error) {
	ents, err := os.ReadDir(t.path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && instanceName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil // ReadDir sorts
}

// Close stops watching and closes the files kept open: stop functions of
// earlier Watches still work, later Watches fail. Groups and their
// processes are left as they are.
func (t *Tree) Close() error {
	t.kept.closeAll()
	return t.w.close()
}

func newTree(dir string, controllers []string, why, leaf string) *Tree {
	return &Tree{path: dir, controllers: controllers, why: why, leaf: leaf, w: newWatcher()}
}

// setupAuto finds tend's own group OWN and makes OWN/tend-ID (SPEC 12).
func setupAuto(id, mountinfo, selfCgroup string) (*Tree, string) {
	if id == "" || !validName("tend-"+id) {
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

	tdir := filepath.Join(dir, "tend-"+id)
	if err := unix.Mkdir(tdir, 0o755); err != nil && err != unix.EEXIST {
		return nil, cannotCreate(dir, err)
	}
	avail := readList(filepath.Join(dir, "cgroup.controllers"))
	delegable := intersect(wanted, avail)

	var why []string
	leaf := ""
	// The hierarchy's root has no cgroup.type and is exempt from the
	// no-internal-processes rule: nothing to move there. Anywhere else,
	// a namespace root included (tend as a container's init), controllers
	// can be enabled below OWN only once OWN holds no process.
	if _, err := os.Stat(filepath.Join(dir, "cgroup.type")); err == nil && len(delegable) > 0 {
		l := filepath.Join(tdir, daemonLeaf)
		if err := unix.Mkdir(l, 0o755); err != nil && err != unix.EEXIST {
			why = append(why, fmt.Sprintf("cannot create the daemon's leaf %s: %v", l, err))
		} else if err := writeFile(filepath.Join(l, "cgroup.procs"), fmt.Sprint(os.Getpid())); err != nil {
			why = append(why, fmt.Sprintf("cannot move the daemon into %s: %v", l, err))
		} else {
			leaf = l
		}
	}
	ownOn, err := enable(dir, avail)
	if err != nil {
		why = append(why, enableWhy(dir, err))
	}
	ctl, err := enable(tdir, ownOn)
	if err != nil {
		why = append(why, enableWhy(tdir, err))
	}
	if !slices.Contains(ctl, "memory") && len(why) == 0 {
		why = append(why, memoryWhy(ms, dir, avail))
	}
	return newTree(tdir, ctl, strings.Join(why, "; "), leaf), ""
}

// setupDir checks and makes an explicit directory: DIR/NAME-K are the
// instance groups; the daemon is not moved.
func setupDir(dir, mountinfo string) (*Tree, error) {
	if !filepath.IsAbs(dir) {
		return nil, badConfig("%q is not an absolute path", dir)
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
	if err := os.MkdirAll(real, 0o755); err != nil {
		return nil, badConfig("cannot create %s: %v", dir, errors.Unwrap(err))
	}
	if err := unix.Access(real, unix.W_OK); err != nil {
		return nil, badConfig("%s is not writable: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(real, "cgroup.procs")); err != nil {
		return nil, badConfig("%s is not a cgroup (no cgroup.procs)", dir)
	}
	avail := readList(filepath.Join(real, "cgroup.controllers"))
	ctl, err := enable(real, avail)
	why := ""
	switch {
	case err != nil:
		why = enableWhy(real, err)
	case !slices.Contains(ctl, "memory"):
		why = memoryWhy(ms, real, avail)
	}
	return newTree(real, ctl, why, ""), nil
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

// memoryWhy says why dir's children cannot have the memory controller.
func memoryWhy(ms []mount, dir string, avail []string) string {
	if slices.Contains(avail, "memory") {
		return "the memory controller is not enabled for " + dir
	}
	for _, m := range ms {
		if m.FSType == "cgroup" && slices.Contains(m.Super, "memory") {
			return "no memory controller: it is bound to the cgroup v1 hierarchy at " + m.Point
		}
	}
	return "no memory controller: it is not delegated to " + dir + " (not in its cgroup.controllers)"
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

// configError is a daemon.cgroup problem: exit 2 at start.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return program.ErrBadConfig }

func badConfig(format string, args ...any) error {
	return &configError{"daemon.cgroup: " + fmt.Sprintf(format, args...)}
}
