package daemon

import (
	"fmt"
	"os"
	"runtime"

	"github.com/tend-sh/tend/internal/limits"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// state is what the daemon holds open in its state directory (docs/trust.md#state-directory):
// the directory and its subdirectories, each checked (tend's own, not
// writable by others, not a symlink) and held by descriptor, so that every
// file in them is opened relative to it without following a symlink; and
// the lock. Set by start, read-only after.
type state struct {
	Root   *statedir.Dir // state_dir: tend.lock, runs.json, programs.json, token, tend.sock
	Logs   *statedir.Dir // state_dir/logs: the runs' captured output
	Audit  *statedir.Dir // state_dir/audit: the event log
	FIFO   *statedir.Dir // state_dir/fifo: the runs' output FIFOs
	Notify *statedir.Dir // state_dir/notify: notify sockets
	lock   *os.File      // tend.lock, flocked while the daemon runs
}

// openState opens (making it mode 0700 if missing) the state directory and
// its subdirectories and takes the lock, or holds on to lock: the lock
// file the daemon held before it re-executed itself (tend upgrade), whose
// flock this process still holds. A symlinked, foreign-owned or
// group/other-writable directory wraps statedir.ErrUnsafe (exit 2).
func openState(cfg *program.Config, lock *os.File) (*state, error) {
	root, err := statedir.Open(cfg.Daemon.StateDir)
	if err != nil {
		return nil, err
	}
	s := &state{Root: root}
	for _, sub := range []struct {
		name string
		dir  **statedir.Dir
	}{{"logs", &s.Logs}, {"audit", &s.Audit}, {"fifo", &s.FIFO}, {"notify", &s.Notify}} {
		if *sub.dir, err = root.Sub(sub.name); err != nil {
			s.Close()
			return nil, err
		}
	}
	if lock != nil {
		s.lock = lock
		return s, nil
	}
	if s.lock, err = acquireLock(root); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the lock and closes the directories.
func (s *state) Close() {
	if s.lock != nil {
		s.lock.Close()
	}
	for _, d := range []*statedir.Dir{s.Logs, s.Audit, s.FIFO, s.Notify, s.Root} {
		if d != nil {
			d.Close()
		}
	}
}

// prepareProcess marks what the daemon inherited close-on-exec (docs/trust.md#descriptors):
// nothing it was started with reaches a run. First thing in Run.
func prepareProcess(opts Options) {
	if err := limits.CloseOnExecInherited(); err != nil && opts.Stderr != nil {
		fmt.Fprintf(opts.Stderr, "tend: %v\n", err)
	}
	// GOMAXPROCS set once: Go's runtime otherwise reads the CPU affinity
	// and the cgroup's CPU limit every second to follow them, which wakes
	// an idle daemon 60 times a minute for a figure a supervisor's few
	// goroutines do not need to follow (docs/daemon.md#what-wakes-an-idle-daemon).
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
}

// raiseLimits makes room for the fleet's descriptors before anything is
// started, and says in one line if it still does not fit. Runs keep the
// limit tend was started with (limits.ForRuns), which the reaper's child
// finds.
func (d *daemon) raiseLimits(instances int) {
	res, err := limits.Raise(limits.Need(instances), d.reaper)
	if err != nil {
		d.note("%v", err)
	}
	if advice := res.Advice(); advice != "" {
		d.note("%s", advice)
	}
}

// checkPTYs says in one line, before the fleet starts, when its tty
// instances do not fit under the kernel's pseudo-terminal limit
// (limits.PTYs): tend does not change a setting of the whole machine.
func (d *daemon) checkPTYs(ttys int) {
	if ttys == 0 {
		return
	}
	p, err := limits.ReadPTYs()
	if err != nil {
		return // no /proc/sys/kernel/pty: nothing to compare with
	}
	if advice := p.Advice(ttys); advice != "" {
		d.note("%s", advice)
	}
}

// ptyAdvice is the doctor's line about the machine's pseudo-terminals, if
// any: nearly all in use, or fewer than the fleet's tty instances.
func (d *daemon) ptyAdvice() []string {
	ttys := 0
	for _, s := range d.mgr.Specs() {
		if s.Tty {
			ttys += s.Instances
		}
	}
	if ttys == 0 {
		return nil
	}
	p, err := limits.ReadPTYs()
	if err != nil {
		return nil
	}
	if a := p.Advice(ttys); a != "" {
		return []string{a}
	}
	if a := p.InUseAdvice(); a != "" {
		return []string{a}
	}
	return nil
}
