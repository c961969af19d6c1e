package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// emptyTimeout bounds the wait for a killed group to empty in Prepare and
// Remove: SIGKILL cannot be ignored, but a process in uninterruptible sleep
// (a hung NFS read) dies only when that ends.
const emptyTimeout = 10 * time.Second

// Group is one instance's group, "NAME-K" in its Tree. A Group is a name:
// it holds no state, and any number of them may name the same directory.
type Group struct {
	t    *Tree
	name string
	path string
	err  error // a name that cannot be a group: every method returns it
}

// Group returns the instance group called name ("NAME-K"). It does no I/O;
// the group need not exist yet (Prepare makes it).
func (t *Tree) Group(name string) *Group {
	g := &Group{t: t, name: name, path: filepath.Join(t.path, name)}
	if !validName(name) {
		g.err = fmt.Errorf("cgroup: %q cannot name an instance group", name)
	}
	return g
}

// Name returns the group's name, "NAME-K".
func (g *Group) Name() string { return g.name }

// Path returns the group's directory.
func (g *Group) Path() string { return g.path }

// Prepare readies the group for a new run and returns an open directory
// descriptor for syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}, so
// the run starts in the group (clone3 CLONE_INTO_CGROUP); the caller closes
// it after the fork. Call it before every fork: the descriptor is good for
// one.
//
// A leftover of an earlier run is killed and waited for (bounded: an error
// if processes remain). The group is then removed and made afresh, for two
// reasons. What the kernel counts per group (memory.peak, memory.events
// oom_kill) then starts from zero for the run, as systemd does for each
// start of a unit. And a group that has been through cgroup.kill must not
// receive a clone3 CLONE_INTO_CGROUP child: on Linux 6.18 (the kernel these
// tests run on) such a child is SIGKILLed as it starts, because the kill
// sequence number the fork checks is read from the parent's group, not the
// target's; migrating into the group works, forking into it does not. A
// group that cannot be removed is therefore an error, not reused. Watches
// of the group carry over.
//
// The limits l are written into the group (see Limits); a limit the tree
// cannot enforce is an error, so no run ever starts without its limit.
//
// Without the memory controller there are no per-run counters, so a group
// this Tree made, that no cgroup.kill has reached since (its last run ended
// with its leader, the common case) and that is empty with no group below
// it, is kept for the next run: a restart then costs one open, not an
// rmdir and a mkdir.
func (g *Group) Prepare(l Limits) (*os.File, error) {
	if g.err != nil {
		return nil, g.err
	}
	if err := g.t.check(l); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	if !g.t.HasMemory() && g.t.made.clean(g.path) && g.bare() {
		if err := g.t.writeLimits(g.path, l); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", g.path, err)
		}
		fd, err := unix.Open(g.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			return os.NewFile(uintptr(fd), g.path), nil
		}
	}
	g.t.made.set(g.path, false)
	if err := g.empty(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	g.t.kept.forget(g.path)
	if err := removeTree(g.path); err != nil {
		return nil, fmt.Errorf("cgroup %s: cannot make it afresh: %w", g.path, err)
	}
	if err := unix.Mkdir(g.path, 0o755); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("cgroup %s: mkdir: %w", g.path, err)
	}
	g.t.w.rearm(g.path)
	g.t.made.set(g.path, true)
	if err := g.t.writeLimits(g.path, l); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	fd, err := unix.Open(g.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: open: %w", g.path, err)
	}
	return os.NewFile(uintptr(fd), g.path), nil
}

// bare reports whether the group is empty and has no group below it
// (cgroup.stat nr_descendants: a run as root may have made some).
func (g *Group) bare() bool {
	if p, err := g.Populated(); err != nil || p {
		return false
	}
	none, err := noneBelow(g.path)
	return err == nil && none
}

// noneBelow reads cgroup.stat: whether dir's group has no group below it.
func noneBelow(dir string) (bool, error) {
	var buf [256]byte
	b, err := readSmall(filepath.Join(dir, "cgroup.stat"), buf[:])
	if err != nil {
		return false, err
	}
	n, ok, err := keyed(b, "nr_descendants")
	return ok && n == 0, err
}

// empty kills what is in the group and waits, bounded, until it is empty.
func (g *Group) empty() error {
	p, err := g.Populated()
	if err != nil || !p {
		return err
	}
	if err := g.Kill(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), emptyTimeout)
	defer cancel()
	if err := g.WaitEmpty(ctx); err != nil {
		pids, _ := g.Procs()
		return fmt.Errorf("cgroup %s: %d processes left %v after cgroup.kill: %w", g.path, len(pids), emptyTimeout, err)
	}
	return nil
}

// Procs returns the pids in the group and in any group a run made below
// it (as root it may): every process of the run. A listing of ten thousand
// instances calls it for each, so the common case is two small reads with
// raw syscalls (no directory listing, nothing registered with the runtime's
// poller): cgroup.procs, then cgroup.stat to learn whether groups below
// exist at all; only then are they listed.
func (g *Group) Procs() ([]int, error) {
	if g.err != nil {
		return nil, g.err
	}
	var pids []int
	if err := procsBelow(g.path, &pids); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	return pids, nil
}

// procsBelow appends the pids of dir's group and of every group below it.
func procsBelow(dir string, pids *[]int) error {
	var buf [512]byte
	b, err := readGrowing(filepath.Join(dir, "cgroup.procs"), buf[:])
	if err != nil {
		return err
	}
	p, err := parseProcs(b)
	if err != nil {
		return err
	}
	*pids = append(*pids, p...)
	if none, err := noneBelow(dir); err != nil || none {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := procsBelow(filepath.Join(dir, e.Name()), pids); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// Populated reports cgroup.events "populated": whether any process is in
// the group or below it. A missing group is an error wrapping
// fs.ErrNotExist.
func (g *Group) Populated() (bool, error) {
	if g.err != nil {
		return false, g.err
	}
	return populated(g.path)
}

func populated(dir string) (bool, error) {
	var buf [128]byte
	b, err := readSmall(filepath.Join(dir, "cgroup.events"), buf[:])
	if err != nil {
		return false, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	v, ok, err := keyed(b, "populated")
	if err != nil || !ok {
		return false, fmt.Errorf("cgroup %s: cgroup.events: no populated line: %q", dir, b)
	}
	return v != 0, nil
}

// Signal sends sig to every member and returns how many it reached.
// Members are read from cgroup.procs and then signalled, so a process
// forked in between is missed (stop_signal is a request; Kill is the
// atomic end), and, as with any pid, one that exited between the read and
// the kill may in principle have had its pid reused.
func (g *Group) Signal(sig syscall.Signal) (int, error) {
	pids, err := g.Procs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		if err := unix.Kill(pid, sig); err == nil {
			n++
		}
	}
	return n, nil
}

// Kill ends every process in the group and below it at once through
// cgroup.kill (Linux 5.14); where the kernel lacks it, it SIGKILLs every
// member until a reading finds no new one. It does not wait: WaitEmpty
// does. Killing a group that does not exist is not an error.
func (g *Group) Kill() error {
	if g.err != nil {
		return g.err
	}
	g.t.made.set(g.path, false) // a killed group must not be forked into again (see Prepare)
	err := writeFile(filepath.Join(g.path, "cgroup.kill"), "1")
	if errors.Is(err, unix.ENOENT) {
		err = killBySignal(g)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: kill: %w", g.path, err)
	}
	return nil
}

// killBySignal is Kill without cgroup.kill, as systemd's cg_kill_recursive
// does it: a member that forks before its SIGKILL lands adds a pid the next
// reading finds; killed processes cannot fork, so the loop ends.
func killBySignal(g *Group) error {
	seen := map[int]bool{}
	for {
		pids, err := g.Procs()
		if err != nil {
			return err
		}
		fresh := 0
		for _, pid := range pids {
			if !seen[pid] {
				seen[pid] = true
				fresh++
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
}

// WaitEmpty returns once the group is empty (cgroup.events populated 0,
// learnt through Watch), or gone, or with ctx's error.
func (g *Group) WaitEmpty(ctx context.Context) error {
	if g.err != nil {
		return g.err
	}
	ch := make(chan struct{}, 1)
	stop, err := g.Watch(func(p bool) {
		if !p {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer stop()
	for {
		// Read after the watch is set: an emptying before it is seen here,
		// one after it is reported.
		p, err := g.Populated()
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !p) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s: waiting to be empty: %w", g.path, ctx.Err())
		case <-ch:
		}
	}
}

// Remove removes the group; a populated one is killed and waited for
// first (bounded). Removing a group that does not exist is not an error.
func (g *Group) Remove() error {
	if g.err != nil {
		return g.err
	}
	g.t.kept.forget(g.path)
	g.t.made.set(g.path, false)
	// The common group is empty, its run ended and drained: one rmdir. A
	// group the kernel refuses to remove (members, groups below) is
	// emptied first.
	if err := unix.Rmdir(g.path); err == nil || err == unix.ENOENT {
		return nil
	}
	if err := g.empty(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := removeTree(g.path); err != nil {
		return fmt.Errorf("cgroup %s: remove: %w", g.path, err)
	}
	return nil
}

// removeTree removes an empty group and the groups below it, deepest
// first (rmdir fails on a group with children). The common group has none:
// one rmdir, without listing the directory.
func removeTree(dir string) error {
	switch err := unix.Rmdir(dir); err {
	case nil, unix.ENOENT:
		return nil
	case unix.EBUSY, unix.ENOTEMPTY:
	default:
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}
