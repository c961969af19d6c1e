package supervisor

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
)

// Containment (docs/containment.md): a run is every process it starts. With cgroups
// each instance has a group of its own, NAME-K below the daemon's tree: a
// run is placed in it at fork, a stop signals every member and kills the
// group after stop_grace, and a run has ended only once its group is empty
// (the leader's exit kills the rest first). Without cgroups the process
// group is signalled, and the members that left it are found by the tree
// (signalRun, sweep).

// containment is an instance's cgroup, if it has one. Its fields are the
// loop's, except members (the broker's, under its own lock); the watcher
// reaches the instance through its inbox.
type containment struct {
	group   *cgroup.Group // nil without cgroups
	unwatch func()        // ends the watch of a draining run
	drains  int           // re-kills of the draining run's group so far
	members *memberCache  // the broker's samples of the group's processes
}

// initContainment gives the instance its group, when the daemon has cgroups.
func (in *Instance) initContainment() {
	t := in.deps.Cgroups
	if t == nil {
		return
	}
	in.group = t.Group(program.InstanceBase(in.spec.Name, in.k))
	in.members = &memberCache{g: in.group, tree: t, describe: in.deps.Tree}
}

// prepareGroup makes the run's group ready and returns the directory to
// fork into, or nil without cgroups. A group that cannot be made is the
// daemon's problem, not the program's (the daemon_resources rule).
func (in *Instance) prepareGroup() (*os.File, error) {
	if in.group == nil {
		return nil, nil
	}
	in.members.reset()
	f, err := in.group.Prepare(cgroup.LimitsOf(in.spec))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", program.ErrResources, err)
	}
	return f, nil
}

// signalRun sends sig to the run led by pid. With cgroups: to every member
// of its group (its pid is the leader's, held by the reaper while unreaped,
// and the group holds this run alone). Without: first the members that left
// its process group (setsid), found by a walk of its tree while the leader
// still holds it together, then the group itself through the reaper.
func (in *Instance) signalRun(pid int, sig syscall.Signal) {
	if in.group != nil {
		if sig == syscall.SIGKILL {
			_ = in.group.Kill()
		} else {
			_, _ = in.group.Signal(sig)
		}
		return
	}
	if in.deps.Tree != nil {
		in.deps.Tree.Signal(pid, sig)
	}
	_ = in.deps.Reaper.Signal(pid, sig, true)
}

// drain is the end of a run whose leader the reaper collected: the rest of
// the run is killed, and the run counts as ended once every process of it
// is gone; true if that is now. With cgroups: the group is killed and its
// emptiness reported by the watcher (never polled). Without: the reaper
// killed the leader's process group; the members last seen in the run's
// tree and the orphans carrying its TEND_ID are killed too, and watched
// through pidfds until they are gone (bounded).
func (in *Instance) drain(st reaper.Status) bool {
	if in.group == nil {
		left := in.sweep(st.PID)
		if len(left) == 0 {
			return true
		}
		in.cur.reaped = &st
		in.stopHealth()
		go func() {
			waitGone(left, drainCheck*drainTries)
			in.putEmptied()
		}()
		return false
	}
	if p, err := in.group.Populated(); err == nil && !p {
		return true // the leader was all there was (the common case): nothing to kill or watch
	}
	in.cur.reaped = &st
	in.stopHealth() // the run is over but for its stragglers: no watchdog looks at it
	_ = in.group.Kill()
	if in.unwatch == nil {
		stop, err := in.group.Watch(func(populated bool) {
			if !populated {
				in.putEmptied()
			}
		})
		if err == nil {
			in.unwatch = stop
		}
	}
	// Read after the watch is set: an emptying before it is seen here,
	// one after it is reported.
	if p, err := in.group.Populated(); err != nil || !p {
		in.stopDrain()
		return true
	}
	in.arm(drainCheck) // in case the kernel's notice is lost: kill again, look again
	return false
}

// drainCheck bounds a wait for a group to empty before it is killed again;
// drainTries such waits and the run counts as ended anyway (and says so).
const (
	drainCheck = 2 * time.Second
	drainTries = 5
)

// onEmptied finishes the draining run once its group is empty (or, without
// cgroups, its last processes are gone).
func (in *Instance) onEmptied() {
	if r := in.cur; r != nil && r.reaped != nil {
		if in.group != nil {
			if p, err := in.group.Populated(); err == nil && p {
				return // a stale notice: the group filled again (it cannot, but look)
			}
		}
		in.stopDrain()
		in.finish(*r.reaped)
	}
}

// recheckDrain is the drain's bound: kill again, or give up waiting.
func (in *Instance) recheckDrain() {
	r := in.cur
	if in.group == nil {
		in.finish(*r.reaped) // waitGone reports at its bound anyway
		return
	}
	p, err := in.group.Populated()
	if err == nil && p && in.drains < drainTries {
		in.drains++
		_ = in.group.Kill()
		in.arm(drainCheck)
		return
	}
	if err == nil && p {
		pids, _ := in.group.Procs()
		in.out.Note(fmt.Sprintf("%d processes of the ended run are still in %s after cgroup.kill: %v", len(pids), in.group.Path(), pids))
	}
	in.stopDrain()
	in.finish(*r.reaped)
}

func (in *Instance) stopDrain() {
	if in.unwatch != nil {
		in.unwatch()
		in.unwatch = nil
	}
	in.drains = 0
	in.drop(func(m *mail) { m.emptied = false }) // a notice of this drain must not end the next
}

// sweep ends what an ended run left behind outside its group, without
// cgroups (the reaper killed the group as the leader exited): the members
// last seen in its tree, and orphans that reached tend, as subreaper,
// carrying this instance's TEND_ID. Nothing accumulates across restarts. It
// returns the pids of the run's processes still there, to wait for.
func (in *Instance) sweep(pid int) []int {
	if in.deps.Tree == nil {
		return nil
	}
	_, left := in.deps.Tree.Signal(pid, syscall.SIGKILL)
	orphans := in.deps.Reaper.SignalUnowned(func(orphan int) bool { return proctree.OwnedBy("/proc", orphan, in.id) })
	return append(left, orphans...)
}

// waitGone returns once every process of pids has exited (through a pidfd
// each: a zombie counts as gone), or after bound.
func waitGone(pids []int, bound time.Duration) {
	var fds []unix.PollFd
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
	}
	defer func() {
		for _, p := range fds {
			unix.Close(int(p.Fd))
		}
	}()
	deadline := time.Now().Add(bound)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return
		}
		open := fds[:0]
		for _, p := range fds {
			if p.Revents != 0 {
				unix.Close(int(p.Fd))
			} else {
				open = append(open, unix.PollFd{Fd: p.Fd, Events: unix.POLLIN})
			}
		}
		fds = open
	}
}

// oomKilled reports whether the kernel's OOM killer ended a process of the
// run that just drained (its group's memory.events; Prepare made the group
// afresh for the run, so any count is the run's).
func (in *Instance) oomKilled() bool {
	if in.group == nil || !in.deps.Cgroups.HasMemory() {
		return false
	}
	m, err := in.group.Memory()
	return err == nil && m.OOMKills > 0
}

// runPeak is the peak resident memory of the run that just drained, for
// its exited event (max_rss_bytes; docs/events.md). The reaped ru_maxrss is
// the run's own only when it is above the daemon's: Go forks with CLONE_VM,
// and Linux's exec records the old address space's high-water mark in the
// child's (exec_mmap), so a 2 MB program started by a daemon of 60 MB was
// reported at 60 MB. Otherwise: the group's memory.peak where the kernel
// keeps it (the group is the run's, made afresh by Prepare), else the
// memory watchdog's highest sample of the run, else 0 (not known).
func (in *Instance) runPeak(reaped int64) int64 {
	var self unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &self) == nil && reaped > self.Maxrss*1024 {
		return reaped
	}
	if in.group != nil && in.deps.Cgroups.HasMemory() {
		if m, err := in.group.Memory(); err == nil && m.Peak > 0 {
			return m.Peak
		}
	}
	return in.mem.peak.Load()
}

// removeGroup removes the instance's group as it goes away.
func (in *Instance) removeGroup() {
	if in.group != nil {
		if err := in.group.Remove(); err != nil {
			in.out.Note("cannot remove " + in.group.Path() + ": " + err.Error())
		}
	}
}

// memSample is the run's memory for the memory watchdog: its group's
// memory.current with the memory controller (one read, no walk), else the
// RSS of its process tree, as without cgroups: the tree keeps each member's
// stat open and rereads it, where describing the group's members afresh
// every second cost six times as much (bench/scale, max_rss fleets).
// Called from the memory watchdog's goroutine: it reads only what does not
// change.
func (in *Instance) memSample(pid int) int64 {
	if in.group != nil && in.deps.Cgroups.HasMemory() {
		n, _ := in.group.MemoryCurrent()
		return n
	}
	return in.deps.Tree.Monitor(pid)
}

// forgetTree drops what the tree kept of an ended run for memSample. Without
// cgroups the stop's sweep does it (Tree.Signal forgets).
func (in *Instance) forgetTree(pid int) {
	if in.group != nil && in.deps.Tree != nil {
		in.deps.Tree.Forget(pid)
	}
}

// membersFunc is the snapshot's Members: the group's processes with
// cgroups, nil (the broker walks the tree) without.
func (in *Instance) membersFunc() func(time.Time, time.Duration) program.Members {
	if in.members == nil {
		return nil
	}
	return in.members.sample
}

// memberCache keeps the last sample of a group's processes for the broker,
// whose listings may reuse a sample a few seconds old: a list of ten
// thousand instances must not read ten thousand groups each time.
type memberCache struct {
	g        *cgroup.Group
	tree     *cgroup.Tree
	describe Tree

	mu   sync.Mutex // guards at and last
	at   time.Time
	last program.Members
}

func (c *memberCache) reset() {
	c.mu.Lock()
	c.at, c.last = time.Time{}, program.Members{}
	c.mu.Unlock()
}

// sample reads the group's members as of asOf, or reuses a sample taken
// as of less than maxAge before it.
func (c *memberCache) sample(asOf time.Time, maxAge time.Duration) program.Members {
	c.mu.Lock()
	defer c.mu.Unlock()
	if maxAge > 0 && !c.at.IsZero() && asOf.Sub(c.at) < maxAge {
		return c.last
	}
	m := program.Members{Tracking: program.TrackingCgroup, At: asOf}
	if pids, err := c.procs(asOf, maxAge); err == nil && c.describe != nil {
		m.Procs, m.RSS, m.Truncated = c.describe.Describe(pids, c.last.Procs)
	}
	if c.tree.HasMemory() {
		if mem, err := c.g.Memory(); err == nil {
			m.RSS, m.Peak = mem.Current, mem.Peak
		}
	}
	c.at, c.last = asOf, m
	return m
}

// procs reads the group's processes. A listing's samples (maxAge > 0) ask
// the tree once, for all, whether any run made groups below its own, and
// read cgroup.procs alone when none did; a single status asks the group.
func (c *memberCache) procs(asOf time.Time, maxAge time.Duration) ([]int, error) {
	if maxAge > 0 && !c.tree.Nested(asOf) {
		return c.g.TopProcs()
	}
	return c.g.Procs()
}

var _ Tree = (*proctree.Tracker)(nil)
