package apitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Terminals is a fake api.Terminals over a Backend's instances. An
// instance is a terminal when its status has a TTY (AddTTY puts one);
// it has a run while its state is running. Each run's "program" is an
// echo, as a shell at its prompt would be: it echoes what is typed, and
// answers each line typed with "you said: LINE" and a new prompt "> ".
// Output writes as the program would. The screens are package terminal's
// real ones, so what is served is what the daemon would serve for the
// same bytes; attached clients get a redraw, then the bytes, and follow
// the instance across runs (NewRun) until it ends for good (End).
type Terminals struct {
	b *Backend

	mu   sync.Mutex      // guards ttys and everything in them
	ttys map[string]*tty // by instance id
}

// tty is one instance's terminal, kept across its runs.
type tty struct {
	scr     *vt.Screen
	running bool   // a run is in place
	line    []byte // the line being typed
	esc     bool   // inside an escape sequence being typed
	typed   []byte // every byte typed, for Typed
	clients map[*attach]struct{}
}

// clientBuffer bounds what a fake client may have queued, as the daemon's
// does: past it the client is sent a fresh screen instead.
const clientBuffer = 1 << 20

// NewTerminals returns a fake over b's instances; a program b adds with
// tty = true gets an 80x24 terminal per instance, running.
func NewTerminals(b *Backend) *Terminals {
	t := &Terminals{b: b, ttys: map[string]*tty{}}
	b.newTTY = func(id string) { t.AddTTY(id, 80, 24) }
	return t
}

// AddTTY makes instance id (which must be in the Backend) a terminal of
// cols x rows with a run in place: its status gets a TTY and state
// running, and its screen shows the prompt "> ".
func (t *Terminals) AddTTY(id string, cols, rows int) {
	t.b.mu.Lock()
	st := t.b.statuses[id]
	st.TTY = &program.TTY{Cols: cols, Rows: rows, ScreenChangedAt: program.Time{Time: time.Now()}}
	if st.State != program.StateRunning {
		t.b.nextPID++
		pid := t.b.nextPID
		st.State, st.Lifecycle, st.PID, st.Why = program.StateRunning, program.LifecycleRunning, &pid, "up 0s"
		st.Run++
	}
	t.b.statuses[id] = st
	t.b.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := &tty{scr: vt.NewScreen(vt.Size{Cols: cols, Rows: rows}), running: true, clients: map[*attach]struct{}{}}
	tt.scr.SetHistory(2000) // tty_history's default
	tt.scr.Feed([]byte("> "))
	t.ttys[id] = tt
}

// Output writes p to instance id's terminal as its program: onto the
// screen and to every attached client.
func (t *Terminals) Output(id string, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tt := t.ttys[id]; tt != nil {
		tt.output(p)
	}
}

// Typed returns every byte typed into instance id's terminal so far.
func (t *Terminals) Typed(id string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tt := t.ttys[id]; tt != nil {
		return slices.Clone(tt.typed)
	}
	return nil
}

// Size returns instance id's terminal size now.
func (t *Terminals) Size(id string) (cols, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tt := t.ttys[id]; tt != nil {
		s := tt.scr.Size()
		return s.Cols, s.Rows
	}
	return 0, 0
}

// Clients is how many clients are attached to instance id.
func (t *Terminals) Clients(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tt := t.ttys[id]; tt != nil {
		return len(tt.clients)
	}
	return 0
}

// NewRun ends instance id's run and starts the next: the clients see
// notice on a line of its own, then the new run's screen (a prompt).
func (t *Terminals) NewRun(id, notice string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := t.ttys[id]
	if tt == nil {
		return
	}
	tt.scr = vt.NewScreen(tt.scr.Size())
	tt.scr.SetHistory(2000)
	tt.scr.Feed([]byte("> "))
	tt.line, tt.esc = nil, false
	for c := range tt.clients {
		c.push([]byte("\r\n\x1b[0m" + notice + "\r\n"))
		c.redraw(tt.scr)
	}
}

// End ends instance id for good in lifecycle ("done" or "error"), with
// state ("exited", "fatal", "stopped") and why: its clients see notice,
// then their Next returns io.EOF, and its last screen stays readable.
func (t *Terminals) End(id, state, lifecycle, why, notice string) {
	t.b.mu.Lock()
	st := t.b.statuses[id]
	st.State, st.Lifecycle, st.PID, st.Why = state, lifecycle, nil, why
	t.b.statuses[id] = st
	t.b.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := t.ttys[id]
	if tt == nil {
		return
	}
	tt.running = false
	for c := range tt.clients {
		if notice != "" {
			c.push([]byte("\r\n\x1b[0m" + notice + "\r\n"))
		}
		c.finish(lifecycle)
	}
	clear(tt.clients)
}

// lookup returns instance id's status and terminal, or the error the
// daemon gives: unknown (ErrNotFound), no tty (ErrNotTerminal).
func (t *Terminals) lookup(id string) (program.Status, *tty, error) {
	list, err := t.b.Status(id, nil)
	if err != nil {
		return program.Status{}, nil, err
	}
	if len(list) != 1 {
		return program.Status{}, nil, fmt.Errorf("%w: %s", program.ErrNotFound, id)
	}
	st := list[0]
	tt := t.ttys[st.ID]
	if st.TTY == nil || tt == nil {
		return st, nil, fmt.Errorf("%s is %w", st.ID, program.ErrNotTerminal)
	}
	return st, tt, nil
}

func notRunning(st program.Status) error {
	return fmt.Errorf("%s is %w: %s", st.ID, program.ErrNotRunning, st.Why)
}

// Screen implements api.Terminals.
func (t *Terminals) Screen(id string, ansi bool, history int) (program.Screen, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, tt, err := t.lookup(id)
	if err != nil {
		return program.Screen{}, err
	}
	snap := tt.scr.Snapshot()
	scr := program.Screen{
		ID: st.ID, Cols: snap.Cols, Rows: snap.Rows,
		Cursor: program.Cursor{X: snap.Cursor.X, Y: snap.Cursor.Y},
		Lines:  snap.Lines, Title: snap.Title,
		ChangedAt: program.Time{Time: snap.ChangedAt},
		Running:   tt.running && st.State == program.StateRunning,
	}
	if history > 0 {
		scr.History = tt.scr.History(history, false)
		if ansi {
			scr.HistoryANSI = tt.scr.History(history, true)
		}
	}
	if ansi {
		scr.ANSI = strings.Split(strings.TrimSuffix(tt.scr.ANSI(), "\n"), "\n")
	}
	return scr, nil
}

// Input implements api.Terminals: it types into every running tty instance
// sel names; a name that names none is an error.
func (t *Terminals) Input(sel string, in program.Input) ([]string, error) {
	list, err := t.b.Status(sel, nil)
	if err != nil {
		return nil, err
	}
	_, _, one := program.SplitID(sel)
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	var firstErr error
	for _, st := range list {
		_, tt, err := t.lookup(st.ID)
		if err == nil && (!tt.running || st.State != program.StateRunning) {
			err = notRunning(st)
		}
		if err != nil {
			if one {
				return nil, err
			}
			firstErr = cmpOr(firstErr, err)
			continue
		}
		tt.typeIn(vt.Input{Text: in.Text, Keys: in.Keys, Enter: in.Enter, Literal: in.Literal}.Encode(tt.scr.BracketedPaste(), tt.scr.AppCursor()))
		ids = append(ids, st.ID)
	}
	if len(ids) == 0 {
		if errors.Is(firstErr, program.ErrNotRunning) {
			return nil, fmt.Errorf("%w: no terminal instance of %s is running", program.ErrNotRunning, sel)
		}
		return nil, fmt.Errorf("%w: %s has no terminal instance (tty = false)", program.ErrNotTerminal, sel)
	}
	return ids, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Attach implements api.Terminals: a tty instance with a run in place.
func (t *Terminals) Attach(id string, readOnly bool) (program.Attach, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, tt, err := t.lookup(id)
	if err != nil {
		return nil, err
	}
	if !tt.running || st.State != program.StateRunning {
		return nil, notRunning(st)
	}
	c := &attach{t: t, id: st.ID, readOnly: readOnly, wake: make(chan struct{}, 1)}
	c.redraw(tt.scr)
	tt.clients[c] = struct{}{}
	return c, nil
}

// output is the program writing p. Under t.mu.
func (tt *tty) output(p []byte) {
	tt.scr.Feed(p)
	for c := range tt.clients {
		if !c.push(p) {
			c.pend = c.pend[:0] // what it missed: a fresh screen instead
			c.redraw(tt.scr)
		}
	}
}

// typeIn is the echo program reading what was typed. Under t.mu.
func (tt *tty) typeIn(b []byte) {
	tt.typed = append(tt.typed, b...)
	var out []byte
	for _, c := range b {
		switch {
		case tt.esc:
			tt.esc = !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '~')
		case c == 0x1b:
			tt.esc = true
		case c == '\r' || c == '\n':
			out = fmt.Appendf(out, "\r\nyou said: %s\r\n> ", tt.line)
			tt.line = tt.line[:0]
		case c == 0x7f || c == 0x08:
			if len(tt.line) > 0 {
				tt.line = tt.line[:len(tt.line)-1]
				out = append(out, "\b \b"...)
			}
		case c == 0x03:
			out = append(out, "^C\r\n> "...)
			tt.line = tt.line[:0]
		case c >= 0x20:
			tt.line = append(tt.line, c)
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		tt.output(out)
	}
}

// attach is one attached client of the fake.
type attach struct {
	t        *Terminals
	id       string
	readOnly bool
	wake     chan struct{} // room for one

	// Guarded by t.mu:
	pend   []byte
	end    string // the lifecycle it ended in, once ended
	ended  bool
	closed bool
}

// push queues p; false when it would pass the bound (then redraw).
func (c *attach) push(p []byte) bool {
	if len(c.pend)+len(p) > clientBuffer {
		return false
	}
	c.pend = append(c.pend, p...)
	c.poke()
	return true
}

// redraw queues the bytes that paint scr.
func (c *attach) redraw(scr *vt.Screen) {
	c.pend = scr.Redraw(c.pend)
	c.poke()
}

func (c *attach) finish(lifecycle string) {
	c.ended, c.end = true, lifecycle
	c.poke()
}

func (c *attach) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Next implements program.Attach.
func (c *attach) Next(ctx context.Context) ([]byte, error) {
	for {
		c.t.mu.Lock()
		if len(c.pend) > 0 {
			p := c.pend
			c.pend = nil
			c.t.mu.Unlock()
			return p, nil
		}
		ended, closed := c.ended, c.closed
		c.t.mu.Unlock()
		if ended || closed {
			return nil, fmt.Errorf("%s: %w", c.id, io.EOF)
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Write implements program.Attach.
func (c *attach) Write(p []byte) error {
	if c.readOnly {
		return errors.New("a read-only client cannot type")
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	st, tt, err := c.t.lookup(c.id)
	if err != nil {
		return err
	}
	if !tt.running {
		return notRunning(st)
	}
	tt.typeIn(p)
	return nil
}

// Resize implements program.Attach: 0x0 leaves the size as it is.
func (c *attach) Resize(cols, rows int) error {
	if cols == 0 && rows == 0 {
		return nil
	}
	size := vt.Size{Cols: cols, Rows: rows}
	if err := size.Valid(); err != nil {
		return err
	}
	c.t.mu.Lock()
	tt := c.t.ttys[c.id]
	if tt != nil {
		tt.scr.Resize(size)
	}
	c.t.mu.Unlock()
	c.t.b.mu.Lock()
	defer c.t.b.mu.Unlock()
	if st := c.t.b.statuses[c.id]; st.TTY != nil {
		ttyCopy := *st.TTY
		ttyCopy.Cols, ttyCopy.Rows = cols, rows
		st.TTY = &ttyCopy
		c.t.b.statuses[c.id] = st
	}
	return nil
}

// End implements program.Attach.
func (c *attach) End() string {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.end
}

// Close implements program.Attach.
func (c *attach) Close() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.closed = true
	if tt := c.t.ttys[c.id]; tt != nil {
		delete(tt.clients, c)
	}
	c.poke()
}
