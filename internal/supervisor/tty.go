package supervisor

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Terminals of tty instances (docs/terminal.md). Each run of a program with
// tty = true gets a new pseudo-terminal (package terminal) before it is
// forked: the slave becomes its stdin, stdout, stderr and controlling
// terminal. A copy of the master goes to the Keeper, a process of tend's
// that reads it always and appends what it reads to the instance's log
// (package keeper), so the run never blocks for want of a daemon and a
// daemon killed at any moment loses nothing of it; the daemon keeps its
// own master (input, resizes, the screen's answers) and follows the log
// into the screen and the attached clients (ttyfollow.go). A later daemon
// takes the master back when it adopts the run, rebuilds the screen from
// the log's tail and follows on from exactly there.
//
// TTY is the instance's terminal as other goroutines reach it: the API's
// screen, input and attach (through the daemon), the broker's status. The
// loop puts each run's terminal in place and takes it away; the last
// screen stays readable after the run, and attached clients follow the
// instance from run to run until it comes to rest (stopped, exited, fatal,
// removed).

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
	follow   *ttyFollow         // feeds cur from the log, while cur is set
	next     *logfile.Cursor    // openTTY's, for the run about to start: the log's end before it
	lost     string             // why the current (adopted) run has no terminal; "" when it has one
	atRest   bool               // no run and none due: attach is refused
	attaches map[*attach]struct{}
	// replayFrom is when the run that ended last started, while no
	// terminal of it is at hand (it ended before this daemon started, or
	// while its terminal was lost): Screen rebuilds its last screen from
	// the log from there (ttyended.go). Zero otherwise.
	replayFrom time.Time
}

// newOutput is the instance's output: a tty instance's log is shared with
// the terminal keeper.
func newOutput(spec *program.Spec, id string, deps Deps) *spawn.Output {
	if spec.Tty {
		return spawn.NewTTYOutput(deps.Capture, id, spec.Logs)
	}
	return spawn.NewOutput(deps.Capture, id, spec.Logs)
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
// cannot be had, or no keeper to read it, is the daemon's problem (the
// daemon_resources rule).
func (in *Instance) openTTY() (*terminal.Terminal, *os.File, error) {
	h := in.tty
	if h == nil {
		return nil, nil, nil
	}
	k := in.deps.Keeper
	if k == nil {
		return nil, nil, fmt.Errorf("%w: no terminal keeper to read the run's terminal", program.ErrResources)
	}
	if err := k.Ready(); err != nil {
		return nil, nil, fmt.Errorf("%w: no terminal keeper to read the run's terminal: %w", program.ErrResources, err)
	}
	cur := in.out.TTYFollow() // the log's end: the run's first byte comes after it
	h.mu.Lock()
	size := h.size
	h.next = cur
	h.mu.Unlock()
	t, slave, err := terminal.Open(terminal.Options{Size: size, History: in.spec.TtyHistory})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", program.ErrResources, err)
	}
	return t, slave, nil
}

// logSpec is the instance's log as the keeper writes it.
func (in *Instance) logSpec() keeper.LogSpec {
	return keeper.LogSpec{Base: in.out.LogBase(), MaxSize: in.spec.Logs.MaxSize, MaxFiles: in.spec.Logs.MaxFiles}
}

// startedTTY follows spawn.Start: the daemon's slave goes (the run has its
// own copies), and the terminal is the run's, read by the keeper and
// followed from the log, or closed if none started.
func (in *Instance) startedTTY(t *terminal.Terminal, slave *os.File, pid int, err error) {
	if t == nil {
		return
	}
	slave.Close()
	h := in.tty
	h.mu.Lock()
	cur := h.next
	h.next = nil
	h.mu.Unlock()
	if err != nil {
		t.Close()
		if cur != nil {
			cur.Close()
		}
		return
	}
	f := in.followTTY(t, cur)
	h.begin(t, pid, "", f)
	fd, err := t.Dup()
	if err == nil {
		err = in.deps.Keeper.Keep(in.id, pid, fd, in.logSpec())
		unix.Close(fd)
	}
	if err != nil {
		in.out.Note("the terminal keeper does not read this run's terminal (it will block once the terminal is full): " + err.Error())
	}
}

// begin puts t in place as the terminal of run pid (nil with why: the run
// has none) and hands it the attached clients.
func (h *TTY) begin(t *terminal.Terminal, pid int, why string, f *ttyFollow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.last
	h.cur, h.pid, h.lost, h.atRest, h.replayFrom, h.follow = t, pid, why, false, time.Time{}, f
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

// endTTY closes the ended run's terminal once the keeper has written all
// the run wrote and the screen has drawn it; its screen stays readable,
// its clients attached to it until the next run or the instance's rest. A
// run that had no terminal here (one that ended while no daemon ran, or
// whose terminal was lost) leaves its last screen to be rebuilt from its
// log, from started.
func (in *Instance) endTTY(pid int, started time.Time) {
	h := in.tty
	if h == nil {
		return
	}
	h.mu.Lock()
	t, f := h.cur, h.follow
	h.cur, h.pid, h.lost, h.follow = nil, 0, "", nil
	if t == nil {
		h.replayFrom = started
	}
	h.mu.Unlock()
	if t == nil {
		return
	}
	k := in.deps.Keeper
	if k != nil {
		k.Drop(in.id, pid) // all the run wrote is in the log now
	}
	if f != nil {
		f.end() // the screen has drawn it
	}
	t.Hangup()
	t.Close()
	in.out.EndTTY()
}

// adoptTTY takes back the terminal of a run an earlier daemon started: the
// master that came with the adoption (tend upgrade) or that the keeper
// holds, with a screen rebuilt from the tail of the run's log and followed
// on from exactly where that tail ends. Without a master the run goes on
// without a terminal tend can type into or resize, and says so (the
// keeper, if it holds it, still reads it into the log).
func (in *Instance) adoptTTY(a Adoption) {
	h := in.tty
	if h == nil {
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
		h.begin(nil, a.PID, "the terminal of this run was lost with the daemon that started it; tend restart "+in.id+" gives it a new one", nil)
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
	replay, at, cur := in.out.TTYTail(a.StartedAt.Truncate(time.Millisecond), replayMax)
	t, err := terminal.Adopt(fd, terminal.Options{Size: size, History: in.spec.TtyHistory, Replay: replay, ReplayAt: at})
	if err != nil {
		if cur != nil {
			cur.Close()
		}
		h.begin(nil, a.PID, "the adopted run's terminal cannot be read: "+err.Error(), nil)
		in.out.Note("cannot read the adopted run's terminal: " + err.Error())
		return
	}
	if cur == nil {
		cur = in.out.TTYFollow()
	}
	h.begin(t, a.PID, "", in.followTTY(t, cur))
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
