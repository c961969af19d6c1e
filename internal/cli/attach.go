package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
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
			"attach do: the current screen at once, then everything the program writes, your\n" +
			"keystrokes to it, your window size applied and followed. Detach with Ctrl-P Ctrl-Q\n" +
			"(--detach-keys, in docker's syntax: \"ctrl-a,d\", \"\" for none); the run goes on.\n" +
			"Attach follows the instance across runs. It exits 0 on detach or when the instance\n" +
			"ends done, 1 when it ends in error. --read-only watches without typing (Ctrl-C\n" +
			"detaches then) and needs no terminal on stdin.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
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
// and what ends the session. Only run's goroutine and the two it starts
// (pump, keyboard) touch it; they share nothing mutable.
type attachSession struct {
	e        *env
	ctx      context.Context // ends the session (as a detach) when done
	id       string
	a        *client.Terminal
	readOnly bool
	detach   []byte // the detach sequence; empty for none

	in     *os.File
	inTTY  bool
	out    io.Writer
	outTTY bool
	sizeFd int // a terminal to read the window size of; -1 for none
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
// starting, a refusal because the instance has no run yet is retried for
// a while: tend run attaches to a program it has just added.
func (s *attachSession) connect(c *client.Client, starting bool) (attachEnd, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	for {
		var err error
		s.a, err = c.AttachTerminal(ctx, s.id, s.readOnly)
		var apiErr *client.APIError
		if starting && errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return attachEnd{}, err
		}
		cancel()
		return s.run()
	}
}

// attachTerminal is tend run --tty --attach's attach (run_tty.go): it
// returns errDetached when the caller detaches, and nil when the run ends
// or ctx does. Without a terminal on stdin it watches read-only: the
// program exists by now, and its output and exit status are still worth
// having.
func (e *env) attachTerminal(ctx context.Context, c *client.Client, id string) error {
	s := e.newAttachSession(ctx, id, false, defaultDetachKeys)
	s.readOnly = !s.inTTY
	end, err := s.connect(c, true)
	switch {
	case err != nil && ctx.Err() != nil:
		// The run ended before it could be attached to (a quick one):
		// what it showed is its last screen.
		e.printLastScreen(c, id)
		return nil
	case err != nil:
		return err
	case end.detached:
		fmt.Fprintf(e.stderr, "[detached from %s]\n", id)
		return errDetached
	case end.signal != nil:
		return fmt.Errorf("attach ended by %v; %s goes on", end.signal, id)
	case end.lifecycle != "":
		// The run's end, and so the exit status, comes on run's own
		// connection, which then ends ctx: wait for it a while.
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	return nil
}

// printLastScreen prints the screen a run left, without the blank rows
// below its last line.
func (e *env) printLastScreen(c *client.Client, id string) {
	scr, err := c.Screen(id, true)
	if err != nil {
		return
	}
	rows := scr.ANSI
	if len(rows) != len(scr.Lines) {
		rows = scr.Lines
	}
	n := len(scr.Lines)
	for n > 0 && scr.Lines[n-1] == "" {
		n--
	}
	for _, row := range rows[:n] {
		fmt.Fprintln(e.stdout, row)
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

// resetModes undoes on the caller's terminal the modes a program's screen
// may have turned on (the alternate screen, mouse reporting, bracketed
// paste, application keys, a hidden cursor, colours, a scroll region), and
// leaves the cursor on the last row, so the shell gets its terminal back
// as it was.
const resetModes = "\x1b[0m\x1b[?1049l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1004l\x1b[?2004l" +
	"\x1b[?1l\x1b>\x1b[?25h\x1b[r\x1b[999;1H\r\n"

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ended := make(chan error, 1)
	go func() { ended <- s.pump(ctx) }()
	detached := make(chan struct{})
	if s.inTTY {
		kb, err := newCancelReader(int(s.in.Fd()))
		if err != nil {
			s.a.Close()
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

	end, err := s.wait(ended, detached, sigs)
	if s.outTTY {
		// The pump has stopped writing: the reset comes after the last of
		// the program's bytes.
		io.WriteString(s.out, resetModes)
	}
	return end, err
}

// wait waits for what ends the session and closes the connection; it
// returns once the pump has stopped.
func (s *attachSession) wait(ended <-chan error, detached <-chan struct{}, sigs <-chan os.Signal) (attachEnd, error) {
	for {
		select {
		case err := <-ended:
			s.a.Close()
			return s.endOf(err)
		case <-detached:
			s.a.Close()
			<-ended
			return attachEnd{detached: true}, nil
		case <-s.ctx.Done():
			// What the connection still carries (the last bytes of a run
			// whose end tend run heard of on its other connection) is
			// drawn first, for a moment.
			select {
			case <-ended:
				s.a.Close()
				return attachEnd{}, nil
			case <-time.After(drainTime):
			}
			s.a.Close()
			<-ended
			return attachEnd{}, nil
		case sig := <-sigs:
			if sig == syscall.SIGWINCH {
				s.resize(context.Background())
				continue
			}
			s.a.Close()
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
	switch {
	case errors.As(err, &end):
		return attachEnd{lifecycle: end.Lifecycle}, nil
	case errors.Is(err, client.ErrDaemonGone):
		return attachEnd{}, fmt.Errorf("attach: the daemon shut down; %s may go on under the next one", s.id)
	}
	return attachEnd{}, fmt.Errorf("attach: the connection to the daemon broke: %w", err)
}

// pump copies the terminal's bytes to the caller's until the connection
// ends, and returns why it ended.
func (s *attachSession) pump(ctx context.Context) error {
	for {
		p, err := s.a.Read(ctx)
		if err != nil {
			return err
		}
		if _, err := s.out.Write(p); err != nil {
			return fmt.Errorf("writing to the terminal: %w", err)
		}
	}
}

// keyboard sends the caller's keystrokes until the detach keys (closing
// detached) or the end. A read-only session sends none: its keys only
// detach (the detach keys, or Ctrl-C).
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
			if err := s.a.Write(ctx, out); err != nil {
				return // the connection is gone: the pump says why
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
	s.a.Resize(ctx, min(max(cols, minCols), maxCols), min(max(rows, minRows), maxRows))
}
