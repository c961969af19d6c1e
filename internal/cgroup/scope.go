package cgroup

// tend as a systemd service keeps its runs in a scope of their own, not in
// its unit's cgroup.
//
// Why. Runs' groups get the memory, cpu and pids controllers only if every
// group above them enables them in cgroup.subtree_control, and the kernel
// lets no process into a group that does (the no-internal-process rule).
// Below tend.service that means the unit's own cgroup; systemd before 254
// (no DelegateSubgroup=) always places a restarted tend there, and fails
// (status 219/CGROUP, retried forever) while the runs of a tend that crashed
// live below it. ExecStartPre= cannot undo it first: systemd 252 places it
// in the unit's cgroup too, and it fails the same way (the VM lane showed
// both). A scope is systemd's own answer for a manager of processes
// ("i-like-continents" in systemd's CGROUP_DELEGATION.md, and how container
// engines keep containers out of their daemon's unit): tend asks systemd
// over D-Bus for tend-ID.scope, Delegate=yes, in the slice of its service,
// and makes its subtree there exactly as in a `cgroup = DIR`. Nothing of it
// is below tend.service, so systemd can start tend again whatever runs; the
// scope and the runs' groups, their limits and counters, outlive a crashed
// tend untouched, and the next tend finds the scope by its name.
//
// A scope lives while a process is in it, and a fleet may have none for a
// while (scaled to 0, or between a run's end and its restart): so a holder,
// `tend cgroup-hold`, a process that only waits, sits in the scope's hold
// leaf (beside tend-ID, so that the scope's own group holds no process and
// may enable controllers). A clean stop that leaves no run ends the holder
// (Tree.Leave) and systemd removes the emptied scope.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// holdLeaf is the group in the scope that holds its holder.
const holdLeaf = "hold"

// scopeTimeout bounds asking systemd for a scope, its start job included.
const scopeTimeout = 30 * time.Second

// holdCommand is the scope's holder, unstarted: tend's hidden verb
// `tend cgroup-hold`, which waits for SIGTERM. Tests run their own binary.
var holdCommand = func() *exec.Cmd {
	return &exec.Cmd{Path: "/proc/self/exe", Args: []string{"tend", "cgroup-hold"}, Env: []string{"GOMAXPROCS=1"}}
}

// scopeSpec is the scope asked of systemd.
type scopeSpec struct {
	name    string // tend-ID.scope
	slice   string // the slice of tend's service, where the scope goes
	service string // tend's service: the scope is ordered before it
	pid     int    // the holder, which systemd moves into the scope
}

// errScopeExists is systemd's answer for a scope name still taken.
var errScopeExists = errors.New("the scope exists")

// startScope starts a scope and returns once it runs. A variable so that
// tests can be systemd.
var startScope = systemdScope

// serviceOf returns the systemd service that tend was started as, from
// its own cgroup own: its unit ("tend.service") when own is a service's
// cgroup and tend is the process systemd started there (SYSTEMD_EXEC_PID,
// systemd 248 and later, or else a child of pid 1), or "". A tend that a
// script in some service runs is not its service's manager.
func serviceOf(own string) string {
	unit := path.Base(own)
	if !strings.HasSuffix(unit, ".service") || unit == ".service" {
		return ""
	}
	if p := os.Getenv("SYSTEMD_EXEC_PID"); p != "" {
		if p != strconv.Itoa(os.Getpid()) {
			return ""
		}
	} else if os.Getppid() != 1 {
		return ""
	}
	return unit
}

// sliceOf names the slice whose cgroup holds own's ("system.slice" for
// /system.slice/tend.service), or "" when that is not a slice.
func sliceOf(own string) string {
	parent := path.Dir(own)
	if parent == "/" {
		return "-.slice"
	}
	if s := path.Base(parent); strings.HasSuffix(s, ".slice") {
		return s
	}
	return ""
}

// underService lays the tree out for tend as systemd service svc, whose
// cgroup is own, at dir: in the scope tend-ID.scope beside dir. Runs an
// earlier tend left below the unit itself (a tend of before scopes, or
// one without a scope) stay where they are, with the controllers they
// had. Without a scope, runs get groups below the unit, but no
// controllers, so that systemd can still start tend again after a crash.
func underService(dir, own, svc, id string, ms []mount) (*Tree, string) {
	old := filepath.Join(dir, "tend-"+id)
	if p, _ := populated(old); p {
		if len(readList(filepath.Join(dir, "cgroup.subtree_control"))) > 0 {
			return subtree(dir, id, ms, true)
		}
		return bare(dir, id, "runs of an earlier tend are in "+old+", below "+svc+", which enables no controllers")
	}
	_ = removeTree(old) // an empty one, of an earlier tend
	slice := sliceOf(own)
	if slice == "" {
		return bare(dir, id, fmt.Sprintf("%s is not in a slice, so tend cannot ask systemd for a scope beside it", own))
	}
	sdir, err := inScope(filepath.Dir(dir), scopeSpec{name: "tend-" + id + ".scope", slice: slice, service: svc})
	if err != nil {
		return bare(dir, id, fmt.Sprintf("systemd gave tend no scope for its runs (%v): their groups are below %s without controllers, or systemd could not start tend again while they live", err, svc))
	}
	t, why := subtree(sdir, id, ms, false)
	if t != nil {
		t.scope = sdir
	}
	return t, why
}

// bare makes PARENT/tend-ID and enables no controller: runs get groups, to
// be placed at fork and killed as a whole, but no limits. why says why.
func bare(parent, id, why string) (*Tree, string) {
	tdir := filepath.Join(parent, "tend-"+id)
	if err := unix.Mkdir(tdir, 0o755); err != nil && err != unix.EEXIST {
		return nil, cannotCreate(parent, err)
	}
	off := map[string]string{}
	for _, c := range wanted {
		off[c] = why
	}
	return newTree(tdir, nil, off, why, ""), ""
}

// inScope returns the directory of the daemon's scope, in sliceDir, with
// its holder in place: the scope an earlier daemon had, while something
// is in it, or else a new one.
func inScope(sliceDir string, sc scopeSpec) (string, error) {
	dir := filepath.Join(sliceDir, sc.name)
	if p, _ := populated(dir); !p {
		if err := newScope(dir, sc); err != nil {
			return "", err
		}
	}
	return dir, hold(dir)
}

// newScope starts a holder where tend is and has systemd start the scope
// with it. A scope of the same name may still be going (emptied by the
// last daemon's clean stop, not yet collected): then it asks again, for as
// long as scopeTimeout. A holder is a child of the daemon that nothing
// here waits for: should it end, the daemon's reaper, the one caller of
// wait4, collects it.
func newScope(dir string, sc scopeSpec) error {
	cmd := holdCommand()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start its holder: %w", err)
	}
	sc.pid = cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
	defer cancel()
	for {
		err := startScope(ctx, sc)
		if err == nil {
			return cmd.Process.Release()
		}
		if !errors.Is(err, errScopeExists) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Process.Release()
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hold puts the scope's holder in its hold leaf: what is in the scope's
// own group (the holder systemd just moved there) goes into the leaf, and
// a leaf found empty (its holder killed) gets a new holder, forked into it.
func hold(dir string) error {
	leaf := filepath.Join(dir, holdLeaf)
	if err := unix.Mkdir(leaf, 0o755); err != nil && err != unix.EEXIST {
		return fmt.Errorf("cannot create %s: %w", leaf, err)
	}
	var buf [64]byte
	b, err := readGrowing(filepath.Join(dir, "cgroup.procs"), buf[:])
	if err != nil {
		return err
	}
	pids, err := parseProcs(b)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid)); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("cannot move the holder into %s: %w", leaf, err)
		}
	}
	if p, err := populated(leaf); err != nil || p {
		return err
	}
	fd, err := unix.Open(leaf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", leaf, err)
	}
	defer unix.Close(fd)
	cmd := holdCommand()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start a holder in %s: %w", leaf, err)
	}
	return cmd.Process.Release()
}

// Scope returns the systemd scope the tree is in ("tend-ID.scope"), or "".
func (t *Tree) Scope() string {
	if t.scope == "" {
		return ""
	}
	return filepath.Base(t.scope)
}

// systemdScope asks systemd, PID 1, over its private socket (no D-Bus
// daemon needed; root's only) for the scope: Delegate=yes; OOMPolicy and
// TasksMax as the shipped unit has them (a run's OOM kill is tend's to
// count, not a reason to stop the scope; every process of the fleet counts
// against TasksMax); Before= tend's service, so that at shutdown systemd
// stops the scope only after tend has stopped the fleet its own way; and
// collected even when it failed, so its name is free for the next one.
func systemdScope(ctx context.Context, sc scopeSpec) error {
	if os.Geteuid() != 0 {
		return errors.New("only root reaches systemd's private socket")
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return errors.New("systemd is not running here (no /run/systemd/system)")
	}
	conn, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("cannot reach systemd: %w", err)
	}
	defer conn.Close()
	props := []sddbus.Property{
		sddbus.PropDescription("tend: the runs of " + sc.service),
		sddbus.PropSlice(sc.slice),
		sddbus.PropPids(uint32(sc.pid)),
		sddbus.PropBefore(sc.service),
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
		{Name: "OOMPolicy", Value: dbus.MakeVariant("continue")},
		{Name: "TasksMax", Value: dbus.MakeVariant(uint64(math.MaxUint64))},
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	done := make(chan string, 1)
	_, err = conn.StartTransientUnitContext(ctx, sc.name, "fail", props, done)
	if dbusName(err) == "org.freedesktop.DBus.Error.PropertyReadOnly" && strings.Contains(err.Error(), "OOMPolicy") {
		// A systemd whose scopes have no OOMPolicy (it came to scopes
		// after services) does not stop a scope for an OOM kill either.
		props = slices.DeleteFunc(props, func(p sddbus.Property) bool { return p.Name == "OOMPolicy" })
		_, err = conn.StartTransientUnitContext(ctx, sc.name, "fail", props, done)
	}
	if err != nil {
		if dbusName(err) == "org.freedesktop.systemd1.UnitExists" {
			return fmt.Errorf("%s: %w", sc.name, errScopeExists)
		}
		return fmt.Errorf("starting %s: %w", sc.name, err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("starting %s: job %s", sc.name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("starting %s: %w", sc.name, ctx.Err())
	}
}

// dbusName is the name of a D-Bus error reply, or "".
func dbusName(err error) string {
	var v dbus.Error
	var p *dbus.Error
	switch {
	case errors.As(err, &v):
		return v.Name
	case errors.As(err, &p):
		return p.Name
	}
	return ""
}
