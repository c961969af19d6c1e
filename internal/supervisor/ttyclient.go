package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
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
func (h *TTY) current() (*terminal.Terminal, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return nil, h.noneLocked()
	}
	return h.cur, nil
}

// noneLocked is the error of a terminal asked for when no run has one.
func (h *TTY) noneLocked() error {
	if h.lost != "" {
		return &lostError{h.in.id + ": " + h.lost}
	}
	return program.ErrNotRunning
}

// Running reports whether a run has the terminal now.
func (h *TTY) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil
}

// Screen returns the current run's screen, or the last run's when none
// runs (Running false), also of a run that ended before this daemon
// started (ttyended.go); with ansi, its rows with colours and attributes
// too; with history, up to that many lines of history. ErrNotRunning
// before any run.
func (h *TTY) Screen(ansi bool, history int) (program.Screen, error) {
	h.rebuilt() // a run that ended before this daemon: its screen from its log
	h.mu.Lock()
	t, running := h.last, h.cur != nil
	var err error
	if t == nil || h.lost != "" {
		err = h.noneLocked()
	}
	h.mu.Unlock()
	if err != nil {
		return program.Screen{}, err
	}
	var snap vt.Snapshot
	var rows, hist, histANSI []string
	t.View(func(s *vt.Screen) {
		snap = s.Snapshot()
		if ansi {
			rows = strings.Split(strings.TrimSuffix(s.ANSI(), "\n"), "\n")
		}
		if history > 0 {
			hist = s.History(history, false)
			if ansi {
				histANSI = s.History(history, true)
			}
		}
	})
	return program.Screen{
		History: hist, HistoryANSI: histANSI,
		ID: h.in.id, Cols: snap.Cols, Rows: snap.Rows,
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
func (h *TTY) Send(in program.Input) error {
	if n := in.Size(); n > program.MaxInput {
		return fmt.Errorf("%w: %d bytes of text and keys, at most %d", program.ErrTooLarge, n, program.MaxInput)
	}
	t, err := h.current()
	if err != nil {
		return err
	}
	return inputError(t.Send(vt.Input{Text: in.Text, Keys: in.Keys, Enter: in.Enter, Literal: in.Literal}))
}

// inputError maps the terminal's input errors to program's. (A name that
// is no key's is no error: it is typed as written, as tmux's send-keys
// types it.)
func inputError(err error) error {
	if errors.Is(err, terminal.ErrClosed) {
		return program.ErrNotRunning // the run ended meanwhile; bare, so the caller says why from the status
	}
	return err
}

// Attach connects a client: the screen (the current run's, or the last
// one's while the next is awaited) at once, then everything the runs
// write, with a notice between runs, until the instance comes to rest.
// ErrNotRunning when it is at rest now.
func (h *TTY) Attach(readOnly bool) (program.Attach, error) {
	h.mu.Lock()
	if h.atRest || h.last == nil || h.lost != "" {
		err := h.noneLocked()
		h.mu.Unlock()
		return nil, err
	}
	a := &attach{h: h, c: terminal.NewClient(attachQueue), readOnly: readOnly}
	h.attaches[a] = struct{}{}
	h.last.Attach(a.c)
	n := len(h.attaches)
	h.mu.Unlock()
	h.in.putTerm(termClients, n)
	return a, nil
}

// detach forgets a; it was attached until now.
func (h *TTY) detach(a *attach) {
	h.mu.Lock()
	_, was := h.attaches[a]
	delete(h.attaches, a)
	n := len(h.attaches)
	if was {
		_ = h.applyLocked() // the latest of the others' size, or tty_size (ttysize.go)
	}
	h.mu.Unlock()
	if was {
		h.in.putTerm(termClients, n)
	}
}

// attach is one client following a tty instance (program.Attach).
type attach struct {
	h        *TTY
	c        *terminal.Client
	readOnly bool
	size     vt.Size // the size it gave the terminal last (guarded by h.mu)
	sized    uint64  // when, in h.sized's count; 0 before it gave one (guarded by h.mu)

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
	t, err := a.h.current()
	if err != nil {
		return err
	}
	return inputError(t.Write(p))
}

func (a *attach) Resize(cols, rows int) error {
	if a.readOnly {
		return nil // a watcher does not size the terminal for the others (ttysize.go)
	}
	return a.h.resize(a, vt.Size{Cols: cols, Rows: rows})
}

func (a *attach) End() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.end
}

func (a *attach) Close() {
	a.h.detach(a)
	a.c.Close()
}

// finish ends the client: the instance came to rest in end.
func (a *attach) finish(end string) {
	a.mu.Lock()
	a.end = end
	a.mu.Unlock()
	a.c.Close()
}
