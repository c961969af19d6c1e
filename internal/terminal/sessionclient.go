package terminal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// What the daemon's api.Terminals asks of a tty instance: its screen,
// input, and attached clients. Errors wrap program's: ErrNotRunning (bare:
// the caller says why from the status) when no run has the terminal,
// ErrTooLarge, ErrInvalid for a size out of range.

// attachQueue bounds what an attached client may have waiting: one that
// falls further behind is sent a fresh screen instead. With the message
// in flight it bounds what a client that never reads costs the daemon
// (docs/trust.md#floods), well under the terminal's 1 MiB default.
const attachQueue = 256 << 10

// ErrReadOnly is a read-only client's Write.
var ErrReadOnly = errors.New("attached read-only: input is refused")

// lostError is a run that has no terminal tend can read (adopted without
// its master).
type lostError struct{ msg string }

func (e *lostError) Error() string { return e.msg }
func (e *lostError) Unwrap() error { return program.ErrNotRunning }

// current is the current run's terminal, or an error saying why there is
// none.
func (s *Session) current() (*Terminal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, s.noneLocked()
	}
	return s.cur, nil
}

// noneLocked is the error of a terminal asked for when no run has one.
func (s *Session) noneLocked() error {
	if s.lost != "" {
		return &lostError{s.id + ": " + s.lost}
	}
	return program.ErrNotRunning
}

// Running reports whether a run has the terminal now.
func (s *Session) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Screen returns the current run's screen, or the last run's when none
// runs (Running false), also of a run that ended before this daemon
// started (sessionended.go); with ansi, its rows with colours and attributes
// too; with history, up to that many lines of history. ErrNotRunning
// before any run.
func (s *Session) Screen(ansi bool, history int) (program.Screen, error) {
	s.rebuilt() // a run that ended before this daemon: its screen from its log
	s.mu.Lock()
	t, running := s.last, s.cur != nil
	var err error
	if t == nil || s.lost != "" {
		err = s.noneLocked()
	}
	s.mu.Unlock()
	if err != nil {
		return program.Screen{}, err
	}
	var snap vt.Snapshot
	var rows, hist, histANSI []string
	t.View(func(scr *vt.Screen) {
		snap = scr.Snapshot()
		if ansi {
			rows = strings.Split(strings.TrimSuffix(scr.ANSI(), "\n"), "\n")
		}
		if history > 0 {
			hist = scr.History(history, false)
			if ansi {
				histANSI = scr.History(history, true)
			}
		}
	})
	return program.Screen{
		History: hist, HistoryANSI: histANSI,
		ID: s.id, Cols: snap.Cols, Rows: snap.Rows,
		Cursor: program.Cursor{X: snap.Cursor.X, Y: snap.Cursor.Y},
		Lines:  snap.Lines, ANSI: rows, Title: snap.Title,
		ChangedAt: program.Time{Time: snap.ChangedAt}, Running: running,
	}, nil
}

// Send types in into the current run's terminal: text (a bracketed paste
// when the program asked for one), then keys by tmux's names, then Enter.
//
// Send is where input enters for a caller that does not come over HTTP,
// so it checks the MaxInput cap (ErrTooLarge), the one check besides the
// API's (413, where input enters over HTTP: docs/terminal.md); the
// terminal and the emulator below do not check it again.
func (s *Session) Send(in program.Input) error {
	if n := in.Size(); n > program.MaxInput {
		return fmt.Errorf("%w: %d bytes of text and keys, at most %d", program.ErrTooLarge, n, program.MaxInput)
	}
	t, err := s.current()
	if err != nil {
		return err
	}
	return inputError(t.Send(vt.Input{Text: in.Text, Keys: in.Keys, Enter: in.Enter, Literal: in.Literal}))
}

// inputError maps the terminal's input errors to program's. (A name that
// is no key's is no error: it is typed as written, as tmux's send-keys
// types it.)
func inputError(err error) error {
	if errors.Is(err, ErrClosed) {
		return program.ErrNotRunning // the run ended meanwhile; bare, so the caller says why from the status
	}
	return err
}

// Attach connects a client: the screen (the current run's, or the last
// one's while the next is awaited) at once, then everything the runs
// write, with a notice between runs, until the instance comes to rest.
// ErrNotRunning when it is at rest now.
func (s *Session) Attach(readOnly bool) (program.Attach, error) {
	s.mu.Lock()
	if s.atRest || s.last == nil || s.lost != "" {
		err := s.noneLocked()
		s.mu.Unlock()
		return nil, err
	}
	a := &attach{s: s, c: NewClient(attachQueue), readOnly: readOnly}
	s.attaches[a] = struct{}{}
	s.last.Attach(a.c)
	n := len(s.attaches)
	s.mu.Unlock()
	s.clients(n)
	return a, nil
}

// detach forgets a; it was attached until now.
func (s *Session) detach(a *attach) {
	s.mu.Lock()
	_, was := s.attaches[a]
	delete(s.attaches, a)
	n := len(s.attaches)
	if was {
		_ = s.applyLocked() // the latest of the others' size, or tty_size (sessionsize.go)
	}
	s.mu.Unlock()
	if was {
		s.clients(n)
	}
}

// attach is one client following a tty instance (program.Attach).
type attach struct {
	s        *Session
	c        *Client
	readOnly bool
	size     vt.Size // the size it gave the terminal last (guarded by s.mu)
	sized    uint64  // when, in s.sized's count; 0 before it gave one (guarded by s.mu)

	mu  sync.Mutex // guards end
	end string     // the lifecycle the instance came to rest in; "" before
}

func (a *attach) Next(ctx context.Context) ([]byte, error) { return a.c.Next(ctx) }

// Write types p as it is. Its size is bounded where it enters: the attach
// route reads messages of at most program.MaxInput bytes.
func (a *attach) Write(p []byte) error {
	if a.readOnly {
		return ErrReadOnly
	}
	t, err := a.s.current()
	if err != nil {
		return err
	}
	return inputError(t.Write(p))
}

func (a *attach) Resize(cols, rows int) error {
	if a.readOnly {
		return nil // a watcher does not size the terminal for the others (sessionsize.go)
	}
	return a.s.resize(a, vt.Size{Cols: cols, Rows: rows})
}

func (a *attach) End() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.end
}

func (a *attach) Close() {
	a.s.detach(a)
	a.c.Close()
}

// finish ends the client: the instance came to rest in end.
func (a *attach) finish(end string) {
	a.mu.Lock()
	a.end = end
	a.mu.Unlock()
	a.c.Close()
}
