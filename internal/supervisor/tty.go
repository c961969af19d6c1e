package supervisor

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Terminals of tty instances (docs/terminal.md). Each run of a program with
// tty = true gets a new pseudo-terminal (package terminal) before it is
// forked: the slave becomes its stdin, stdout, stderr and controlling
// terminal, the master stays with tend and is read on the epoll loops into
// the screen, the attached clients and the log (spawn.Output.TTYOutput).
// A copy of the master goes to the Keeper, so that the terminal outlives
// the daemon as the run does; a later daemon takes it back when it adopts
// the run, and replays the run's log into a fresh screen.
//
// TTY is the instance's terminal as other goroutines reach it: the API's
// screen, input and attach (through the daemon), the broker's status. The
// loop puts each run's terminal in place and takes it away; the last
// screen stays readable after the run, and attached clients follow the
// instance from run to run until it comes to rest (stopped, exited, fatal,
// removed).

// Keeper holds copies of tty runs' masters outside the daemon. Its methods
// must not block for long: they are called from instance loops.
type Keeper interface {
	// Keep hands the keeper a copy of fd, the master of run pid of
	// instance id; the caller keeps fd.
	Keep(id string, pid int, fd int)
	// Drop says run pid of instance id is over: its copy can go.
	Drop(id string, pid int)
	// Take returns the master a keeper holds for run pid of instance id,
	// left by an earlier daemon, for the caller to own; false if none.
	Take(id string, pid int) (fd int, ok bool)
}

// TTY is a tty instance's terminal as other goroutines see it.
type TTY struct {
	in *Instance // for its id, and for putTerm; nothing else of it is touched

	mu       sync.Mutex         // guards what follows
	cur      *terminal.Terminal // the current run's terminal; nil when no run has one
	pid      int                // the current run's leader, while cur is set
	last     *terminal.Terminal // cur, or the terminal of the run that ended last (closed, its screen kept); nil before any
	base     vt.Size            // tty_size: the size while no client sizes the terminal
	size     vt.Size            // the terminal's size, and the next run's: sizeLocked's choice
	sized    uint64             // counts the clients' sizings: the latest has the highest
	lost     string             // why the current (adopted) run has no terminal; "" when it has one
	atRest   bool               // no run and none due: attach is refused
	attaches map[*attach]struct{}
	// replayFrom is when the run that ended last started, while no
	// terminal of it is at hand (it ended before this daemon started, or
	// while its terminal was lost): Screen rebuilds its last screen from
	// the log from there (ttyended.go). Zero otherwise.
	replayFrom time.Time
}

// newTTY returns the terminal side of a tty instance, nil for others.
func newTTY(in *Instance) *TTY {
	if !in.spec.Tty {
		return nil
	}
	size := vt.Size{Cols: in.spec.TtyCols, Rows: in.spec.TtyRows}
	if size.Valid() != nil {
		size = vt.DefaultSize
	}
	return &TTY{in: in, base: size, size: size, atRest: true, attaches: map[*attach]struct{}{}}
}

// openTTY makes the terminal of the run about to start and returns it with
// its slave, for spawn.Request.TTY; nil, nil without tty. A terminal that
// cannot be had is the daemon's problem (the daemon_resources rule).
func (in *Instance) openTTY() (*terminal.Terminal, *os.File, error) {
	h := in.tty
	if h == nil {
		return nil, nil, nil
	}
	h.mu.Lock()
	size := h.size
	h.mu.Unlock()
	output, made := in.ttyOutput()
	t, slave, err := terminal.Open(terminal.Options{Size: size, History: in.spec.TtyHistory, Output: output})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", program.ErrResources, err)
	}
	made(t)
	return t, slave, nil
}

// ttyOutput returns the Output of a terminal about to be made (its reads go
// to the instance's log) and the function to call with that terminal once
// it is made: the terminal reads from the moment it is made, and a pause
// the log asked for before then is undone there, not lost.
func (in *Instance) ttyOutput() (func([]byte) bool, func(*terminal.Terminal)) {
	ctl := &ttyCtl{}
	output := in.out.TTYOutput(ctl)
	return output, func(t *terminal.Terminal) {
		ctl.t.Store(t)
		t.Resume() // nothing paused: nothing done
	}
}

// ttyCtl is a terminal's control for the capture (spawn.TTYControl),
// before and after the terminal exists.
type ttyCtl struct {
	t atomic.Pointer[terminal.Terminal]
}

func (c *ttyCtl) Pause() error {
	if t := c.t.Load(); t != nil {
		return t.Pause()
	}
	return nil
}

func (c *ttyCtl) Resume() {
	if t := c.t.Load(); t != nil {
		t.Resume()
	}
}

// startedTTY follows spawn.Start: the daemon's slave goes (the run has its
// own copies), and the terminal is the run's, or closed if none started.
func (in *Instance) startedTTY(t *terminal.Terminal, slave *os.File, pid int, err error) {
	if t == nil {
		return
	}
	slave.Close()
	if err != nil {
		t.Close()
		return
	}
	in.tty.begin(t, pid, "")
	if k := in.deps.Keeper; k != nil {
		if fd, err := t.Dup(); err == nil {
			k.Keep(in.id, pid, fd)
			unix.Close(fd)
		}
	}
}

// begin puts t in place as the terminal of run pid (nil with why: the run
// has none) and hands it the attached clients.
func (h *TTY) begin(t *terminal.Terminal, pid int, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.last
	h.cur, h.pid, h.lost, h.atRest, h.replayFrom = t, pid, why, false, time.Time{}
	if t == nil {
		return
	}
	h.last = t
	if old != nil && old != t {
		old.MoveClients(t)
	}
	// A client may have sized the terminal since t was made (or an
	// adopted run's terminal was left at another size): t takes the size
	// the clients attached now give it, tty_size with none.
	_ = h.applyLocked() // an error is the ioctl's: the size stays as it was
}

// endTTY closes the ended run's terminal, after reading what is left in
// it; its screen stays readable, its clients attached to it until the next
// run or the instance's rest. The keeper's copy goes. A run that had no
// terminal here (one that ended while no daemon ran, or whose terminal was
// lost) leaves its last screen to be rebuilt from its log, from started.
func (in *Instance) endTTY(pid int, started time.Time) {
	h := in.tty
	if h == nil {
		return
	}
	h.mu.Lock()
	t := h.cur
	h.cur, h.pid, h.lost = nil, 0, ""
	if t == nil {
		h.replayFrom = started
	}
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.Close() // without h.mu: it waits for the epoll loop
	in.out.EndTTY()
	if k := in.deps.Keeper; k != nil {
		k.Drop(in.id, pid)
	}
}

// adoptTTY takes back the terminal of a run an earlier daemon started: the
// master that came with the adoption (tend upgrade) or that the keeper
// holds, with a screen rebuilt from the tail of the run's log. Without
// either the run goes on without a terminal tend can read, and says so.
func (in *Instance) adoptTTY(a Adoption) {
	h := in.tty
	if h == nil {
		return
	}
	fd, ok := a.TTYFD, a.TTYFD > 0
	if k := in.deps.Keeper; k != nil {
		// The keeper's copy is claimed either way, so that it stays held
		// for this run (and is let go when it ends).
		if kfd, kok := k.Take(in.id, a.PID); kok && ok {
			unix.Close(kfd)
		} else if kok {
			fd, ok = kfd, true
		}
	}
	if !ok {
		h.begin(nil, a.PID, "the terminal of this run was lost with the daemon that started it; tend restart "+in.id+" gives it a new one")
		in.out.Note("the adopted run's terminal was not held by a keeper: its output is not read")
		return
	}
	h.mu.Lock()
	size := h.size
	h.mu.Unlock()
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		if s := (vt.Size{Cols: int(ws.Col), Rows: int(ws.Row)}); s.Valid() == nil {
			// As a client of the earlier daemon left it: the log's bytes
			// were drawn at that size. begin then gives the terminal the
			// size of the clients attached now, tty_size with none (the
			// screen reflows, the program gets SIGWINCH), so that a
			// client's size does not outlive its attach.
			size = s
		}
	}
	// The log's times are to the millisecond: the run's first record may
	// carry the millisecond it started in.
	replay, at := in.out.TTYTail(a.StartedAt.Truncate(time.Millisecond), replayMax)
	output, made := in.ttyOutput()
	t, err := terminal.Adopt(fd, terminal.Options{Size: size, History: in.spec.TtyHistory, Replay: replay, ReplayAt: at, Output: output})
	if err != nil {
		h.begin(nil, a.PID, "the adopted run's terminal cannot be read: "+err.Error())
		in.out.Note("cannot read the adopted run's terminal: " + err.Error())
		return
	}
	made(t)
	h.begin(t, a.PID, "")
}

// ttyName names a tty run's master in an upgrade's handover.
func ttyName(id string) string { return "tty/" + id }

// liveTTY hands the current run's master over by inheritance (tend
// upgrade): a copy in the process's table, close-on-exec, in fds.
func (in *Instance) liveTTY(fds map[string]int) {
	if in.tty == nil {
		return
	}
	in.tty.mu.Lock()
	t := in.tty.cur
	in.tty.mu.Unlock()
	if t == nil {
		return
	}
	if fd, err := t.Dup(); err == nil {
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

// replayMax bounds the bytes of a run's log replayed into an adopted run's
// screen: enough for many repaints of a large screen, at most a few
// milliseconds of the screen's work.
const replayMax = 1 << 20

// ttyEnded tells the attached clients how the run ended and what comes
// next, on a line of its own: "[tend] planner:0 exited: exit 1
// (runtime_error), crash 2 of 5; next run in 2s".
func (in *Instance) ttyEnded(ex program.Exit, d restart.Decision) {
	h := in.tty
	if h == nil {
		return
	}
	h.mu.Lock()
	t := h.last
	h.mu.Unlock()
	if t != nil {
		t.Notice(endNotice(in.id, in.spec, ex, d))
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
	h := in.tty
	if h == nil {
		return
	}
	end := program.LifecycleDone
	switch {
	case in.state == program.StateFatal:
		end = program.LifecycleError
	case in.state == program.StateExited && in.lastExit != nil && in.lastExit.LikelyCause != program.CauseCleanExit:
		end = program.LifecycleError
	}
	h.mu.Lock()
	h.atRest = true
	as := h.attaches
	h.attaches = map[*attach]struct{}{}
	_ = h.applyLocked() // tty_size again, for the next run
	h.mu.Unlock()
	for a := range as {
		a.finish(end)
	}
	if len(as) > 0 {
		in.putTerm(termClients, 0)
	}
}

// ttyStatus is the status's tty object, read when a status is asked for
// (the screen's change time moves without the loop).
func (h *TTY) ttyStatus() *program.TTY {
	h.mu.Lock()
	t, n, size := h.last, len(h.attaches), h.size
	h.mu.Unlock()
	st := &program.TTY{Cols: size.Cols, Rows: size.Rows, Clients: n}
	if t != nil {
		size = t.Size()
		st.Cols, st.Rows = size.Cols, size.Rows
		st.ScreenChangedAt = program.Time{Time: t.ChangedAt()}
	}
	return st
}

// screenChangedAt is when the current run's screen last changed: a tty
// agent's turn is its screen changing (zero without a terminal).
func (h *TTY) screenChangedAt() time.Time {
	h.mu.Lock()
	t := h.cur
	h.mu.Unlock()
	if t == nil {
		return time.Time{}
	}
	return t.ChangedAt()
}

// activity is what an agent's turn is read from when it sends no
// X_TEND_TURN: its screen's changes with a terminal, else its output.
func (in *Instance) activity() time.Time {
	if in.tty != nil {
		return in.tty.screenChangedAt()
	}
	return in.out.LastActivity()
}

// lastOutput is activity as the broker reads it, from its own goroutine.
func (in *Instance) lastOutput() func() time.Time {
	if h := in.tty; h != nil {
		return h.screenChangedAt
	}
	return in.out.LastActivity
}

// ttyReport is the snapshot's live tty object, nil without tty.
func (in *Instance) ttyReport() func() *program.TTY {
	if in.tty == nil {
		return nil
	}
	return in.tty.ttyStatus
}

// TTYs resolves a selector as Resolve does and returns, with each id, the
// instance's terminal side: nil for an instance without tty.
func (m *Manager) TTYs(sel string) ([]string, []*TTY, error) {
	insts, err := m.resolve(sel)
	if err != nil {
		return nil, nil, err
	}
	ttys := make([]*TTY, len(insts))
	for i, in := range insts {
		ttys[i] = in.tty
	}
	return idsOf(insts), ttys, nil
}
