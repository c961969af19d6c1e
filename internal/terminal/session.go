package terminal

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// The across-runs terminal of a tty instance (docs/terminal.md). Each run
// of a program with tty = true gets a new pseudo-terminal (Open) before it
// is forked: the slave becomes its stdin, stdout, stderr and controlling
// terminal. A copy of the master goes to the keeper, a process of tend's
// that reads it always and appends what it reads to the instance's log
// (package keeper), so the run never blocks for want of a daemon and a
// daemon killed at any moment loses nothing of it; the daemon keeps its
// own master (input, resizes, the screen's answers) and follows the log
// into the screen and the attached clients (sessionfollow.go). A later
// daemon takes the master back when it adopts the run, rebuilds the screen
// from the log's tail and follows on from exactly there.
//
// The instance (package supervisor) decides when a run starts and ends,
// talks to the keeper and says how a run ended; it calls a handful of the
// Session's methods to do so (Open, Started, Adopt, Lost, End, Notice,
// Rest). Other goroutines reach the terminal through the Session too: the
// API's screen, input and attach, the broker's status. The last screen
// stays readable after the run, and attached clients follow the instance
// from run to run until it comes to rest (stopped, exited, fatal,
// removed).

// SessionLog is what a Session reads of its instance's log, which the
// keeper writes (spawn.Output's tty side). Its functions may be called
// from any goroutine.
type SessionLog struct {
	// Follow is a cursor at the log's end now (nil: no log).
	Follow func() *logfile.Cursor
	// Tail is up to max bytes of the terminal's output in the log since
	// since, the time of its last record and a cursor just after it (nil:
	// none).
	Tail func(since time.Time, max int) ([]byte, time.Time, *logfile.Cursor)
	// Output is where the follower hands what it fed the terminal (the
	// capture: activity, forward_output); false asks it to wait for ctl's
	// Resume. Nil: nowhere.
	Output func(ctl FollowControl) func(p []byte) bool
}

// FollowControl is a follower as the capture sees it (spawn.TTYControl).
type FollowControl interface {
	Pause() error
	Resume()
}

// SessionConfig is what a Session is made with: what it needs of its
// instance, which it does not otherwise reach.
type SessionConfig struct {
	ID      string  // the instance's id, for the errors and the screen
	Size    vt.Size // tty_size: the size while no client sizes the terminal (invalid: vt.DefaultSize)
	History int     // tty_history, for each run's screen
	Log     SessionLog
	// Clients tells the instance the number of attached clients changed
	// (it posts to its inbox). Called without the Session's lock; it
	// must not block.
	Clients func(n int)
}

// Session is a tty instance's terminal across its runs.
//
// mu guards the fields below it: the current and last terminals, the
// size and the clients' sizings, the follower, the attached clients (and
// each attach's size and sized). The Terminals have locks of their own;
// a Session calls them under mu only for their size and their clients
// (applyLocked, begin's MoveClients, Attach), never for the disk.
type Session struct {
	// Set by NewSession, never changed.
	id      string
	history int
	log     SessionLog
	clients func(n int)

	mu       sync.Mutex      // guards what follows
	cur      *Terminal       // the current run's terminal; nil when no run has one
	pid      int             // the current run's leader, while cur is set
	last     *Terminal       // cur, or the terminal of the run that ended last (closed, its screen kept); nil before any
	base     vt.Size         // tty_size: the size while no client sizes the terminal
	size     vt.Size         // the terminal's size, and the next run's: sizeLocked's choice
	sized    uint64          // counts the clients' sizings: the latest has the highest
	follow   *follower       // feeds cur from the log, while cur is set
	next     *logfile.Cursor // Open's, for the run about to start: the log's end before it
	lost     string          // why the current (adopted) run has no terminal; "" when it has one
	atRest   bool            // no run and none due: attach is refused
	attaches map[*attach]struct{}
	// replayFrom is when the run that ended last started, while no
	// terminal of it is at hand (it ended before this daemon started, or
	// while its terminal was lost): Screen rebuilds its last screen from
	// the log from there (sessionended.go). Zero otherwise.
	replayFrom time.Time
}

// NewSession returns the terminal of a tty instance, at rest.
func NewSession(c SessionConfig) *Session {
	size := c.Size
	if size.Valid() != nil {
		size = vt.DefaultSize
	}
	clients := c.Clients
	if clients == nil {
		clients = func(int) {}
	}
	return &Session{id: c.ID, history: c.History, log: c.Log, clients: clients,
		base: size, size: size, atRest: true, attaches: map[*attach]struct{}{}}
}

// Open makes the terminal of the run about to start and returns it with
// its slave, for the run's stdio; next is where the run's first byte will
// be in the log (its end now), for Started; on error it is closed.
func (s *Session) Open(next *logfile.Cursor) (*Terminal, *os.File, error) {
	s.mu.Lock()
	size := s.size
	s.next = next
	s.mu.Unlock()
	t, slave, err := Open(Options{Size: size, History: s.history})
	if err != nil {
		s.mu.Lock()
		if s.next == next {
			s.next = nil
		}
		s.mu.Unlock()
		if next != nil {
			next.Close() // no run follows it: Started is not called
		}
	}
	return t, slave, err
}

// Started follows the fork of a run Open made t for: the daemon's slave
// goes (the run has its own copies), and t is the run's, followed from the
// log, or closed if no run started (err). It reports whether t is the
// run's: then the caller hands a copy of its master to the keeper.
func (s *Session) Started(t *Terminal, slave *os.File, pid int, err error) bool {
	if t == nil {
		return false
	}
	slave.Close()
	s.mu.Lock()
	cur := s.next
	s.next = nil
	s.mu.Unlock()
	if err != nil {
		t.Close()
		if cur != nil {
			cur.Close()
		}
		return false
	}
	s.begin(t, pid, "", s.startFollow(t, cur))
	return true
}

// begin puts t in place as the terminal of run pid (nil with why: the run
// has none) and hands it the attached clients.
func (s *Session) begin(t *Terminal, pid int, why string, f *follower) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.last
	s.cur, s.pid, s.lost, s.atRest, s.replayFrom, s.follow = t, pid, why, false, time.Time{}, f
	if t == nil {
		return
	}
	s.last = t
	if old != nil && old != t {
		old.MoveClients(t)
	}
	// A client may have sized the terminal since t was made (or an
	// adopted run's terminal was left at another size): t takes the size
	// the clients attached now give it, tty_size with none.
	_ = s.applyLocked() // an error is the ioctl's: the size stays as it was
}

// End closes the ended run's terminal once all the run wrote is in its log
// (drained returns then: the caller asks the keeper) and the screen has
// drawn it; its screen stays readable, its clients attached to it until
// the next run or the instance's rest. It reports whether the run had a
// terminal here. A run that had none (one that ended while no daemon ran,
// or whose terminal was lost) leaves its last screen to be rebuilt from
// its log, from started.
//
// The terminal stays the current one until the screen has drawn the last
// of the run's bytes: a client that attaches meanwhile (tend run -a of a
// run that ends at once, while the keeper writes its last bytes) is the
// terminal's, and gets them, rather than the screen as it was before them.
// The instance's goroutine is the only one that changes cur.
func (s *Session) End(started time.Time, drained func()) bool {
	s.mu.Lock()
	t, f := s.cur, s.follow
	if t == nil {
		s.cur, s.pid, s.lost, s.follow = nil, 0, "", nil
		s.replayFrom = started
	}
	s.mu.Unlock()
	if t == nil {
		return false
	}
	if drained != nil {
		drained()
	}
	if f != nil {
		f.end() // the screen and its clients have it all
	}
	s.mu.Lock()
	s.cur, s.pid, s.lost, s.follow = nil, 0, "", nil
	s.mu.Unlock()
	t.Hangup()
	t.Close()
	return true
}

// Lost says run pid goes on without a terminal tend can type into or
// resize, and why (an adopted run whose master was not kept).
func (s *Session) Lost(pid int, why string) {
	s.begin(nil, pid, why, nil)
}

// Adopt takes back the terminal of run pid, started at started by an
// earlier daemon: fd, its master, now the Session's, with a screen rebuilt
// from the tail of the run's log and followed on from exactly where that
// tail ends. An error is the master's: the run goes on without a terminal
// (Lost), and fd is closed.
func (s *Session) Adopt(fd, pid int, started time.Time) error {
	s.mu.Lock()
	size := s.size
	s.mu.Unlock()
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		if w := (vt.Size{Cols: int(ws.Col), Rows: int(ws.Row)}); w.Valid() == nil {
			// As a client of the earlier daemon left it: the log's bytes
			// were drawn at that size. begin then gives the terminal the
			// size of the clients attached now, tty_size with none (the
			// screen reflows, the program gets SIGWINCH), so that a
			// client's size does not outlive its attach.
			size = w
		}
	}
	// The log's times are to the millisecond: the run's first record may
	// carry the millisecond it started in.
	replay, at, cur := s.tail(started.Truncate(time.Millisecond))
	t, err := Adopt(fd, Options{Size: size, History: s.history, Replay: replay, ReplayAt: at})
	if err != nil {
		if cur != nil {
			cur.Close()
		}
		s.Lost(pid, "the adopted run's terminal cannot be read: "+err.Error())
		return err
	}
	s.begin(t, pid, "", s.startFollow(t, cur))
	return nil
}

// tail is the log's Tail of at most ReplayMax bytes, nothing without a log.
func (s *Session) tail(since time.Time) ([]byte, time.Time, *logfile.Cursor) {
	if s.log.Tail == nil {
		return nil, time.Time{}, nil
	}
	return s.log.Tail(since, ReplayMax)
}

// DupCurrent returns a copy of the current run's master, close-on-exec,
// for the caller to own (an upgrade's handover); false without one.
func (s *Session) DupCurrent() (int, bool) {
	s.mu.Lock()
	t := s.cur
	s.mu.Unlock()
	if t == nil {
		return -1, false
	}
	fd, err := t.Dup()
	return fd, err == nil
}

// ReplayMax bounds the bytes of a run's log replayed into an adopted run's
// screen: enough for many repaints of a large screen, at most a few
// milliseconds of the screen's work.
const ReplayMax = 1 << 20

// Notice tells the attached clients line, on a line of its own: how the
// run ended and what comes next.
func (s *Session) Notice(line string) {
	s.mu.Lock()
	t := s.last
	s.mu.Unlock()
	if t != nil {
		t.Notice(line)
	}
}

// Rest lets the attached clients go when the instance comes to rest
// (stopped, exited, fatal, or removed): each learns how it ended, end
// ("done" or "error", as the status's lifecycle says it).
func (s *Session) Rest(end string) {
	s.mu.Lock()
	s.atRest = true
	as := s.attaches
	s.attaches = map[*attach]struct{}{}
	_ = s.applyLocked() // tty_size again, for the next run
	s.mu.Unlock()
	for a := range as {
		a.finish(end)
	}
	if len(as) > 0 {
		s.clients(0)
	}
}

// Status is the status's tty object, read when a status is asked for (the
// screen's change time moves without the instance's loop).
func (s *Session) Status() *program.TTY {
	s.mu.Lock()
	t, n, size := s.last, len(s.attaches), s.size
	s.mu.Unlock()
	st := &program.TTY{Cols: size.Cols, Rows: size.Rows, Clients: n}
	if t != nil {
		size = t.Size()
		st.Cols, st.Rows = size.Cols, size.Rows
		st.ScreenChangedAt = program.Time{Time: t.ChangedAt()}
	}
	return st
}

// ScreenChangedAt is when the current run's screen last changed: a tty
// agent's turn is its screen changing (zero without a terminal).
func (s *Session) ScreenChangedAt() time.Time {
	s.mu.Lock()
	t := s.cur
	s.mu.Unlock()
	if t == nil {
		return time.Time{}
	}
	return t.ChangedAt()
}
