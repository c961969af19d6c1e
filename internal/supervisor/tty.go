package supervisor

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// The runs of tty instances (docs/terminal.md). The terminal across runs
// (the current and last screens, the size, the attached clients) is a
// terminal.Session; the instance decides when a run gets its terminal and
// when it ends, hands each run's master to the keeper, which reads it into
// the instance's log (package keeper), and tells the clients how each run
// ended and what comes next.

// Keeper is the terminal keeper, as the instance loops use it. Its methods
// must not block for long: they are called from instance loops.
type Keeper interface {
	// Ready makes sure a keeper runs: a tty run is not started without
	// one (its terminal would fill, and it would block).
	Ready() error
	// Keep hands the keeper a copy of fd, the master of run pid of
	// instance id, to read into log; the caller keeps fd.
	Keep(id string, pid int, fd int, log keeper.LogSpec) error
	// Drop says run pid of instance id is over, and returns once all the
	// run wrote is in its log (or the keeper did not answer in time).
	Drop(id string, pid int)
	// Take returns the master of run pid of instance id that an earlier
	// daemon left with the keeper, for the caller to own, the keeper
	// reading it into log; false if none.
	Take(id string, pid int, log keeper.LogSpec) (fd int, ok bool)
}

// newOutput is the instance's output: a tty instance's log is shared with
// the terminal keeper.
func newOutput(spec *program.Spec, id string, deps Deps) *spawn.Output {
	if spec.Tty {
		return spawn.NewTTYOutput(deps.Capture, id, spec.Logs)
	}
	return spawn.NewOutput(deps.Capture, id, spec.Logs)
}

// newTTY returns the terminal of a tty instance, nil for others. in.out
// is set.
func newTTY(in *Instance) *terminal.Session {
	if !in.spec.Tty {
		return nil
	}
	return terminal.NewSession(terminal.SessionConfig{
		ID:      in.id,
		Size:    vt.Size{Cols: in.spec.TtyCols, Rows: in.spec.TtyRows},
		History: in.spec.TtyHistory,
		Log: terminal.SessionLog{
			Follow: in.out.TTYFollow,
			Tail:   in.out.TTYTail,
			Output: func(ctl terminal.FollowControl) func([]byte) bool { return in.out.TTYOutput(ctl) },
		},
		Clients: func(n int) { in.putTerm(termClients, n) },
	})
}

// openTTY makes the terminal of the run about to start and returns it with
// its slave, for spawn.Request.TTY; nil, nil without tty. A terminal that
// cannot be had, or no keeper to read it, is the daemon's problem (the
// daemon_resources rule).
func (in *Instance) openTTY() (*terminal.Terminal, *os.File, error) {
	if in.tty == nil {
		return nil, nil, nil
	}
	k := in.deps.Keeper
	if k == nil {
		return nil, nil, fmt.Errorf("%w: no terminal keeper to read the run's terminal", program.ErrResources)
	}
	if err := k.Ready(); err != nil {
		return nil, nil, fmt.Errorf("%w: no terminal keeper to read the run's terminal: %w", program.ErrResources, err)
	}
	// The log's end: the run's first byte comes after it.
	t, slave, err := in.tty.Open(in.out.TTYFollow())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", program.ErrResources, err)
	}
	return t, slave, nil
}

// logSpec is the instance's log as the keeper writes it.
func (in *Instance) logSpec() keeper.LogSpec {
	return keeper.LogSpec{Base: in.out.LogBase(), MaxSize: in.spec.Logs.MaxSize, MaxFiles: in.spec.Logs.MaxFiles}
}

// startedTTY follows spawn.Start: the terminal is the run's, and the
// keeper reads a copy of its master; or it is closed if no run started.
func (in *Instance) startedTTY(t *terminal.Terminal, slave *os.File, pid int, err error) {
	if in.tty == nil || !in.tty.Started(t, slave, pid, err) {
		return
	}
	fd, err := t.Dup()
	if err == nil {
		err = in.deps.Keeper.Keep(in.id, pid, fd, in.logSpec())
		unix.Close(fd)
	}
	if err != nil {
		in.out.Note("the terminal keeper does not read this run's terminal (it will block once the terminal is full): " + err.Error())
	}
}

// endTTY closes the ended run's terminal once the keeper has written all
// the run wrote and the screen has drawn it (terminal.Session.End).
func (in *Instance) endTTY(pid int, started time.Time) {
	if in.tty == nil {
		return
	}
	drained := func() {
		if k := in.deps.Keeper; k != nil {
			k.Drop(in.id, pid) // all the run wrote is in the log now
		}
	}
	if in.tty.End(started, drained) {
		in.out.EndTTY()
	}
}

// adoptTTY takes back the terminal of a run an earlier daemon started: the
// master that came with the adoption (tend upgrade) or that the keeper
// holds, with a screen rebuilt from the tail of the run's log and followed
// on from exactly where that tail ends. Without a master the run goes on
// without a terminal tend can type into or resize, and says so (the
// keeper, if it holds it, still reads it into the log).
func (in *Instance) adoptTTY(a Adoption) {
	if in.tty == nil {
		return
	}
	fd, ok := a.TTYFD, a.TTYFD > 0
	k := in.deps.Keeper
	if k != nil {
		// The keeper's copy is claimed either way, so that it stays held
		// for this run (and is let go when it ends).
		kfd, kok := k.Take(in.id, a.PID, in.logSpec())
		switch {
		case kok && ok:
			unix.Close(kfd)
		case kok:
			fd, ok = kfd, true
		case ok:
			// The master came by inheritance alone: the keeper reads it
			// from now on.
			if err := k.Keep(in.id, a.PID, fd, in.logSpec()); err != nil {
				in.out.Note("the terminal keeper does not read the adopted run's terminal: " + err.Error())
			}
		}
	}
	if !ok {
		in.tty.Lost(a.PID, "the terminal of this run was lost with the daemon that started it; tend restart "+in.id+" gives it a new one")
		in.out.Note("the adopted run's terminal was not held by a keeper: its output is not read")
		return
	}
	if err := in.tty.Adopt(fd, a.PID, a.StartedAt); err != nil {
		in.out.Note("cannot read the adopted run's terminal: " + err.Error())
	}
}

// ttyName names a tty run's master in an upgrade's handover.
func ttyName(id string) string { return "tty/" + id }

// liveTTY hands the current run's master over by inheritance (tend
// upgrade): a copy in the process's table, close-on-exec, in fds.
func (in *Instance) liveTTY(fds map[string]int) {
	if in.tty == nil {
		return
	}
	if fd, ok := in.tty.DupCurrent(); ok {
		fds[ttyName(in.id)] = fd
	}
}

// takeOverTTY takes up the terminal of a run an upgrade handed over: its
// master by inheritance (the keeper's copy if that is missing), the screen
// rebuilt from the log, to which the old daemon wrote everything it read.
func (in *Instance) takeOverTTY(r *LiveRun, take func(string) (int, bool)) {
	if in.tty == nil {
		return
	}
	a := Adoption{PID: r.PID, StartedAt: r.Started}
	if fd, ok := take(ttyName(in.id)); ok {
		a.TTYFD = fd
	}
	in.adoptTTY(a)
}

// ttyEnded tells the attached clients how the run ended and what comes
// next, on a line of its own: "[tend] planner:0 exited: exit 1
// (runtime_error), crash 2 of 5; next run in 2s".
func (in *Instance) ttyEnded(ex program.Exit, d restart.Decision) {
	if in.tty != nil {
		in.tty.Notice(endNotice(in.id, in.spec, ex, d))
	}
}

// endNotice is the line ttyEnded sends.
func endNotice(id string, spec *program.Spec, ex program.Exit, d restart.Decision) string {
	var how string
	switch {
	case ex.SpawnErr != nil:
		how = "failed to start: " + ex.SpawnErr.Error()
	case ex.Signaled:
		how = "exited: " + program.SignalName(ex.Signal)
	case ex.Unknown:
		how = "exited"
	default:
		how = fmt.Sprintf("exited: exit %d", ex.Code)
	}
	line := fmt.Sprintf("[tend] %s %s (%s)", id, how, d.Cause)
	if d.Row == 4 {
		line += fmt.Sprintf(", crash %d of %d", d.CrashCount, spec.MaxCrashes)
	}
	switch d.Next {
	case restart.NextRestart:
		if d.Delay <= 0 {
			return line + "; next run now"
		}
		return line + "; next run in " + shortDuration(d.Delay)
	case restart.NextFatal:
		return line + "; gave up"
	case restart.NextExited:
		return line + fmt.Sprintf("; not restarted (restart = %q)", spec.Restart)
	}
	return line + "; stopped"
}

// shortDuration prints d as people write it: 2s, 1.9s, 350ms, 1m30s.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ttyAtRest lets the attached clients go when the instance comes to rest
// (stopped, exited, fatal, or removed): each learns how it ended, "done" or
// "error", as the status's lifecycle says it.
func (in *Instance) ttyAtRest() {
	if in.tty == nil {
		return
	}
	end := program.LifecycleDone
	switch {
	case in.state == program.StateFatal:
		end = program.LifecycleError
	case in.state == program.StateExited && in.lastExit != nil && in.lastExit.LikelyCause != program.CauseCleanExit:
		end = program.LifecycleError
	}
	in.tty.Rest(end)
}

// activity is what an agent's turn is read from when it sends no
// X_TEND_TURN: its screen's changes with a terminal, else its output.
func (in *Instance) activity() time.Time {
	if in.tty != nil {
		return in.tty.ScreenChangedAt()
	}
	return in.out.LastActivity()
}

// lastOutput is activity as the broker reads it, from its own goroutine.
func (in *Instance) lastOutput() func() time.Time {
	if in.tty != nil {
		return in.tty.ScreenChangedAt
	}
	return in.out.LastActivity
}

// ttyReport is the snapshot's live tty object, nil without tty.
func (in *Instance) ttyReport() func() *program.TTY {
	if in.tty == nil {
		return nil
	}
	return in.tty.Status
}

// TTYs resolves a selector as Resolve does and returns, with each id, the
// instance's terminal: nil for an instance without tty.
func (m *Manager) TTYs(sel string) ([]string, []*terminal.Session, error) {
	insts, err := m.resolve(sel)
	if err != nil {
		return nil, nil, err
	}
	ttys := make([]*terminal.Session, len(insts))
	for i, in := range insts {
		ttys[i] = in.tty
	}
	return idsOf(insts), ttys, nil
}
