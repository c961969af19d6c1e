package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

func (e *env) attachCmd() *cobra.Command {
	var readOnly bool
	var detachKeys string
	cmd := &cobra.Command{
		Use:   "attach ID [--read-only] [--detach-keys KEYS]",
		Short: "connect this terminal to a terminal program's",
		Long: "Connect the calling terminal to a tty instance's terminal, as docker attach and tmux\n" +
			"attach do: the current screen at once, on your terminal's alternate screen, then\n" +
			"everything the program writes, your keystrokes to it, your window size applied and\n" +
			"followed. Detach with Ctrl-P Ctrl-Q (--detach-keys, in docker's syntax: \"ctrl-a,d\",\n" +
			"\"\" for none); the run goes on, your screen comes back, and the modes the program\n" +
			"turned on in your terminal (mouse, bracketed paste, kitty keyboard, ...) are turned\n" +
			"off. Attach follows the instance across runs and across a daemon that restarts\n" +
			"(tend upgrade; it waits up to a minute for one). It exits 0 on detach or when the\n" +
			"instance ends done, 1 when it ends in error. --read-only watches without typing\n" +
			"(Ctrl-C detaches then) and needs no terminal on stdin.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if !e.parts.attaches() {
				return e.delegate("attach")
			}
			keys, err := parseDetachKeys(detachKeys)
			if err != nil {
				return usageError{err}
			}
			s := e.newAttachSession(e.ctx, args[0], readOnly, keys)
			if !s.inTTY && !readOnly {
				return usageError{errors.New("attach: stdin is not a terminal: attach types into the run from one (--read-only watches without)")}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			end, err := s.connect(c, false)
			if err != nil {
				return err
			}
			switch {
			case end.detached:
				fmt.Fprintf(e.stderr, "[detached from %s]\n", s.id)
			case end.signal != nil:
				return fmt.Errorf("attach ended by %v; %s goes on", end.signal, s.id)
			case end.lifecycle != "" && end.lifecycle != program.LifecycleDone:
				return fmt.Errorf("%s has ended: %s (tend status %s says why)", s.id, end.lifecycle, s.id)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.BoolVar(&readOnly, "read-only", false, "watch without typing")
	f.StringVar(&detachKeys, "detach-keys", "ctrl-p,ctrl-q", "the `KEYS` that detach: characters or ctrl-X, comma-separated; \"\" for none")
	return cmd
}

// attachSession is one tend attach: the connection, the caller's terminal
// and what ends the session. run's goroutine and the two it starts (pump,
// keyboard) share it; the connection, which the pump replaces when it
// reconnects, is guarded by mu, and draw is the pump's alone.
type attachSession struct {
	e        *env
	ctx      context.Context // ends the session (as a detach) when done
	c        *client.Client
	id       string
	readOnly bool
	detach   []byte // the detach sequence; empty for none
	inline   bool   // tend run -a --tty: drawn where the cursor is (screenOut)

	in     *os.File
	inTTY  bool
	out    io.Writer
	outTTY bool
	sizeFd int        // a terminal to read the window size of; -1 for none
	draw   *screenOut // how the run's bytes reach out, when it is a terminal

	mu      sync.Mutex      // guards a
	a       client.Terminal // the connection now
	closing atomic.Bool     // the session is ending: a connection closed is no break
	noticed time.Time       // when the pump last said it waits for the daemon; the pump's
}

// conn is the connection now.
func (s *attachSession) conn() client.Terminal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a
}

// attachEnd is how a session ended, when nothing went wrong: the caller
// detached (the detach keys, or SIGINT), the instance ended for good in a
// lifecycle ("done" or "error"), another signal came, or ctx ended (none
// of these set).
type attachEnd struct {
	detached  bool
	lifecycle string
	signal    os.Signal
}

// newAttachSession readies an attach to id on this process's terminal.
func (e *env) newAttachSession(ctx context.Context, id string, readOnly bool, keys []byte) *attachSession {
	s := &attachSession{e: e, ctx: ctx, id: id, readOnly: readOnly, detach: keys, in: e.stdin, out: e.stdout, sizeFd: -1}
	s.inTTY = s.in != nil && term.IsTerminal(int(s.in.Fd()))
	if f, ok := s.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.outTTY, s.sizeFd = true, int(f.Fd())
	}
	if s.inTTY {
		s.sizeFd = int(s.in.Fd())
	}
	return s
}

// connect attaches through c and runs the session to its end. With
// starting, a refusal because the instance has no run yet (or none any
// more) is retried until s.ctx ends: tend run attaches to a program it
// has just added.
func (s *attachSession) connect(c *client.Client, starting bool) (attachEnd, error) {
	s.c = c
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	for {
		a, err := s.e.parts.Attach(ctx, c, s.id, s.readOnly)
		var apiErr *client.APIError
		if starting && errors.As(err, &apiErr) && (apiErr.Status == 409 || apiErr.Status == 404) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return attachEnd{}, err
		}
		cancel()
		s.a = a
		return s.run()
	}
}

// drainTime is how long a session whose context ended goes on drawing
// what the connection still brings, unless the daemon ends it first.
const drainTime = time.Second

// defaultDetachKeys is Ctrl-P Ctrl-Q, as docker's.
var defaultDetachKeys = []byte{0x10, 0x11}

// Bounds of a terminal's size, as the daemon keeps them (docs/terminal.md).
const (
	minCols, maxCols = 10, 1000
	minRows, maxRows = 2, 500
)

// run connects the terminals until the instance ends, the caller detaches
// or a signal comes, and restores the caller's terminal on every way out.
func (s *attachSession) run() (attachEnd, error) {
	// Signals are caught before the terminal is made raw, so none can end
	// tend with the terminal left so.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if s.inTTY {
		fd := int(s.in.Fd())
		old, err := term.MakeRaw(fd)
		if err != nil {
			s.a.Close()
			return attachEnd{}, fmt.Errorf("attach: putting the terminal in raw mode: %w", err)
		}
		defer term.Restore(fd, old)
	}
	if s.outTTY {
		cols, rows := 0, 0
		if s.sizeFd >= 0 {
			cols, rows, _ = term.GetSize(s.sizeFd)
		}
		s.draw = newScreenOut(s.e.parts.Screen, s.out, s.inline, cols, rows)
		if !s.inline {
			// The caller's alternate screen: its own screen and
			// scrollback come back when the session ends.
			io.WriteString(s.out, "\x1b[?1049h")
		}
		// On every way out, once the pump has stopped writing: the
		// reset comes after the last of the program's bytes.
		defer func() { s.out.Write(s.draw.leave()) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ended := make(chan error, 1)
	go func() { ended <- s.pump(ctx) }()
	detached := make(chan struct{})
	if s.inTTY {
		kb, err := newCancelReader(int(s.in.Fd()))
		if err != nil {
			cancel()
			s.conn().Close()
			<-ended
			return attachEnd{}, fmt.Errorf("attach: %w", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.keyboard(ctx, kb, detached)
		}()
		defer func() {
			kb.Cancel()
			<-done
			kb.Close()
		}()
	}
	s.resize(ctx)

	return s.wait(ended, detached, sigs, cancel)
}

// wait waits for what ends the session and closes the connection; it
// returns once the pump has stopped. stop ends the pump's and keyboard's
// context.
func (s *attachSession) wait(ended <-chan error, detached <-chan struct{}, sigs <-chan os.Signal, stop context.CancelFunc) (attachEnd, error) {
	closeConn := func() {
		// Closing first says goodbye, after the keys already sent; then
		// a pump waiting for the daemon to come back stops waiting.
		s.closing.Store(true)
		s.conn().Close()
		stop()
	}
	for {
		select {
		case err := <-ended:
			closeConn()
			return s.endOf(err)
		case <-detached:
			closeConn()
			<-ended
			return attachEnd{detached: true}, nil
		case <-s.ctx.Done():
			// What the connection still carries (the last bytes of a run
			// whose end tend run heard of on its other connection) is
			// drawn first, for a moment.
			select {
			case <-ended:
				closeConn()
				return attachEnd{}, nil
			case <-time.After(drainTime):
			}
			closeConn()
			<-ended
			return attachEnd{}, nil
		case sig := <-sigs:
			if sig == syscall.SIGWINCH {
				s.resize(context.Background())
				continue
			}
			closeConn()
			<-ended
			if sig == syscall.SIGINT {
				return attachEnd{detached: true}, nil
			}
			return attachEnd{signal: sig}, nil
		}
	}
}

// endOf is the outcome of a connection that ended by itself.
func (s *attachSession) endOf(err error) (attachEnd, error) {
	var end *client.TerminalEnded
	var gone *daemonGone
	switch {
	case errors.As(err, &end):
		return attachEnd{lifecycle: end.Lifecycle}, nil
	case errors.As(err, &gone):
		return attachEnd{}, err
	}
	return attachEnd{}, fmt.Errorf("attach: %w", err)
}

// pump copies the terminal's bytes to the caller's until the connection
// ends for good, and returns why it ended. A connection that breaks (the
// daemon restarts: tend upgrade, or a daemon killed and started again) is
// made again, as tend events -f does, for up to reconnectWait.
func (s *attachSession) pump(ctx context.Context) error {
	out := s.out
	if s.draw != nil {
		out = s.draw
	}
	got := 0 // messages on this connection
	for {
		p, err := s.conn().Read(ctx)
		var end *client.TerminalEnded
		switch {
		case err == nil:
			got++
			if _, err := out.Write(p); err != nil {
				return fmt.Errorf("writing to the terminal: %w", err)
			}
			continue
		case ctx.Err() != nil || s.closing.Load() || errors.As(err, &end):
			return err
		}
		// A daemon that takes a connection and drops it at once as it
		// stops is one restart: one line.
		again := got <= 1 && time.Since(s.noticed) < 5*time.Second
		got = 0
		if err := s.reconnect(ctx, err, again); err != nil {
			return err
		}
		if s.draw != nil {
			s.draw.reconnected()
		}
		s.resize(ctx)
	}
}

// reconnectWait bounds how long an attach waits for its daemon to come
// back (docs/terminal.md): long enough for an upgrade or a supervisor's
// restart of a killed daemon, short enough that a daemon brought down for
// good does not hold the caller's terminal.
var reconnectWait = time.Minute // a variable for tests

// daemonGone is the end of an attach whose daemon did not come back;
// reason says how it went (not the connection's raw error).
type daemonGone struct {
	id     string
	reason string
}

func (e *daemonGone) Error() string {
	return fmt.Sprintf("attach: %s and the daemon did not come back within %v; %s may go on under the next one", e.reason, reconnectWait, e.id)
}

// reconnect says in one line that the connection broke (why; not again
// when it said so a moment ago), and attaches
// again once the daemon answers; it gives up after reconnectWait, when
// the session ends, or when the daemon refuses (the instance is gone or at
// rest).
func (s *attachSession) reconnect(ctx context.Context, why error, again bool) error {
	s.conn().Close()
	reason := "the connection to the daemon broke"
	if errors.Is(why, client.ErrDaemonGone) {
		reason = "the daemon is restarting"
	}
	switch {
	case again: // said a moment ago
	case s.outTTY:
		// On the caller's screen, where the run's screen is painted again
		// over it once the daemon is back.
		fmt.Fprintf(s.out, "\r\n[tend] %s; waiting up to %v for it to come back\r\n", reason, reconnectWait)
	default:
		nl := "\n"
		if s.inTTY {
			nl = "\r\n"
		}
		fmt.Fprintf(s.e.stderr, "[tend] %s; waiting up to %v for it to come back%s", reason, reconnectWait, nl)
	}
	s.noticed = time.Now()
	wctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		a, err := s.e.parts.Attach(wctx, s.c, s.id, s.readOnly)
		var apiErr *client.APIError
		switch {
		case err == nil:
			s.mu.Lock()
			s.a = a
			s.mu.Unlock()
			return nil
		case errors.As(err, &apiErr) && apiErr.Status < 500:
			return fmt.Errorf("attach: after the daemon came back: %w", err)
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return &daemonGone{id: s.id, reason: reason}
		}
		select {
		case <-wctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// keyboard sends the caller's keystrokes until the detach keys (closing
// detached) or the end. A read-only session sends none: its keys only
// detach (the detach keys, or Ctrl-C). Keys typed while the daemon is
// away are dropped, as a terminal's are while its program is not reading.
func (s *attachSession) keyboard(ctx context.Context, kb *cancelReader, detached chan<- struct{}) {
	d := detacher{keys: s.detach}
	buf := make([]byte, 4096)
	for {
		n, err := kb.Read(buf)
		if err != nil {
			return
		}
		out, done := d.filter(buf[:n])
		if s.readOnly {
			if done || containsByte(buf[:n], 0x03) {
				close(detached)
				return
			}
			continue
		}
		if len(out) > 0 {
			a := s.conn()
			err := a.Write(ctx, out)
			if err != nil && s.conn() != a {
				err = s.conn().Write(ctx, out) // made again meanwhile
			}
			if err != nil && ctx.Err() != nil {
				return
			}
		}
		if done {
			close(detached)
			return
		}
	}
}

func containsByte(p []byte, c byte) bool {
	for _, b := range p {
		if b == c {
			return true
		}
	}
	return false
}

// resize applies the caller's window size, when it has one: a terminal
// that reports 0x0 (under script, a CI runner) leaves the size as it is.
func (s *attachSession) resize(ctx context.Context) {
	if s.readOnly || s.sizeFd < 0 {
		return
	}
	cols, rows, err := term.GetSize(s.sizeFd)
	if err != nil || cols <= 0 || rows <= 0 {
		return
	}
	if s.draw != nil {
		s.draw.resize(cols, rows)
	}
	s.conn().Resize(ctx, min(max(cols, minCols), maxCols), min(max(rows, minRows), maxRows))
}
