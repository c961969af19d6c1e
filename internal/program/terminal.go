package program

import (
	"context"
	"errors"
)

// The terminal of a tty instance (docs/terminal.md), as the API, the CLI and
// the dashboard see it. The daemon keeps the screen (package terminal); these
// are its answers.

// Errors of the terminal verbs (screen, send, attach), mapped by the API to
// 409 and by the CLI to exit 1; an unknown id is ErrNotFound (404, exit 3).
var (
	// ErrNotTerminal: the instance has no terminal (tty = false). The
	// message names it: "worker:0 is not a terminal program (tty = false)".
	ErrNotTerminal = errors.New("not a terminal program (tty = false)")
	// ErrNotRunning: the instance has no run now; the message carries its why.
	ErrNotRunning = errors.New("not running")
	// ErrTooLarge: text sent to a terminal over MaxInput bytes (API 413).
	ErrTooLarge = errors.New("input too large")
)

// MaxInput is the most text one send may type into a terminal.
const MaxInput = 64 << 10

// TTY is the terminal part of a tty instance's status ("tty" in the
// status object; absent for a program without tty).
type TTY struct {
	Cols            int  `json:"cols"`
	Rows            int  `json:"rows"`
	Clients         int  `json:"clients"`           // attached clients now
	ScreenChangedAt Time `json:"screen_changed_at"` // the screen's content last changed (a cursor blink is no change)
}

// Screen is a tty run's screen now (GET /v1/screen/{id}): one line per row,
// trailing spaces trimmed, as `tmux capture-pane -p` prints a pane. ANSI,
// filled only when asked for (?ansi=1), has the same rows with their colours
// and attributes as escape sequences.
type Screen struct {
	ID        string   `json:"id"`
	Cols      int      `json:"cols"`
	Rows      int      `json:"rows"`
	Cursor    Cursor   `json:"cursor"`
	Lines     []string `json:"lines"`
	ANSI      []string `json:"ansi,omitempty"`
	Title     string   `json:"title"`
	ChangedAt Time     `json:"changed_at"`
	// History is up to the asked number of the lines that scrolled off the
	// top, oldest first (?history=N); HistoryANSI the same with colours
	// (with ?ansi=1 too).
	History     []string `json:"history,omitempty"`
	HistoryANSI []string `json:"history_ansi,omitempty"`
	// Running is false for the last screen of a run that has ended.
	Running bool `json:"running"`
}

// Cursor is a position on a screen, from 0 at the top left.
type Cursor struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Input is what one send types into a terminal (POST
// /v1/programs/{id}/input): Text first (as a bracketed paste when the
// program turned that mode on, unless Literal: then as keystrokes, as
// tmux's send-keys -l types it), then each of Keys, named as tmux's
// send-keys names them ("Enter", "C-c", "M-x", "F5") or, when an item is
// no key name, typed as it is written (":set nu"), then Enter if set.
type Input struct {
	Text    string   `json:"text,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Enter   bool     `json:"enter,omitempty"`
	Literal bool     `json:"literal,omitempty"`
}

// Size is the bytes of text in carries, its Text and its Keys (a key's
// name is counted as written, which is at least what it types): what the
// MaxInput cap is on.
func (in Input) Size() int {
	n := len(in.Text)
	for _, k := range in.Keys {
		n += len(k)
	}
	return n
}

// Attach is a client's end of a tty instance's terminal
// (GET /v1/attach/{id}): the current screen at once, then everything the
// run writes; across runs it follows the instance, with a one-line notice
// between them.
type Attach interface {
	// Next returns the next bytes for the client's terminal: first a
	// redraw of the screen, then the run's output (or a fresh redraw when
	// the client fell behind, and notices between runs). It returns an
	// error wrapping io.EOF once the instance has ended for good (End
	// then says how), or ctx's error.
	Next(ctx context.Context) ([]byte, error)
	// Write types p into the current run's terminal (refused read-only).
	Write(p []byte) error
	// Resize applies the client's window size; 0x0 leaves it as it is.
	Resize(cols, rows int) error
	// End is the lifecycle the instance ended in ("done" or "error"),
	// once Next has returned io.EOF; "" before.
	End() string
	// Close detaches the client; the run goes on.
	Close()
}
