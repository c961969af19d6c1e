package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// runTerminal is tend run --tty --attach: the program runs in a terminal
// tend holds, and this command is attached to it inline, as docker run -it
// is (docs/terminal.md): the run's output where the cursor is, nothing
// cleared. Two connections: POST /v1/programs?attach=1&raw=1 adds the
// program, holds its logs and reports how its run ended, with every byte
// the run wrote (kept, not drawn: they are drawn if the run ended before
// the terminal could be attached to, however soon that was), and the
// terminal attach (attachTerminal) draws the screen and carries the keys.
// When our stdout is no terminal (a file, a pipe), what it gets is the
// run's bytes as the run wrote them, from the first connection, as they
// come. The run's end ends both and is our exit status; a detach (Ctrl-P Ctrl-Q)
// ends the attach alone: we exit 0 and the run goes on (and with --rm is
// removed by the daemon once it ends).
func (e *env) runTerminal(c *client.Client, body map[string]any) error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var early runBytes
	if f, ok := e.stdout.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		// Not a terminal (a file, a pipe): the run's bytes as it wrote
		// them, from its log, rather than what paints a screen.
		early.live = e.stdout
	}
	attached := make(chan error, 1)
	var id string
	end, err := c.AttachRaw(ctx, body, func(a program.Added) {
		id = a.IDs[0]
		go func() {
			err := e.attachTerminal(ctx, c, id, &early)
			attached <- err
			if err != nil || ctx.Err() == nil {
				cancel() // detached, or could not attach: leave the run be
			}
		}()
	}, early.add)
	if err != nil {
		cancel()
		if id == "" {
			return err
		}
		// The attach restores the caller's terminal before we go.
		select {
		case aerr := <-attached:
			if errors.Is(aerr, errDetached) {
				return nil
			}
			if aerr != nil {
				return aerr
			}
		case <-time.After(drainTime + 5*time.Second):
		}
		return err
	}
	cancel()
	<-attached // the terminal's last screen is drawn
	return e.runEnded(id, end)
}

// errDetached is what attachTerminal returns when the user detached.
var errDetached = errors.New("detached")

// attachTerminal is tend run --tty --attach's attach: it returns
// errDetached when the caller detaches, and nil when the run ends or ctx
// does. Without a terminal on stdin it watches read-only: the program
// exists by now, and its output and exit status are still worth having.
// A run that ended before it could be attached to (and, with --rm, was
// removed) is shown by every byte it wrote, from early.
func (e *env) attachTerminal(ctx context.Context, c *client.Client, id string, early *runBytes) error {
	s := e.newAttachSession(ctx, id, false, defaultDetachKeys)
	s.readOnly = !s.inTTY
	s.inline = true
	if early.live != nil {
		s.out = io.Discard // early prints the bytes
	}
	end, err := s.connect(c, true)
	switch {
	case err != nil && ctx.Err() != nil:
		early.print(e.stdout)
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

// runBytes keeps what a run wrote to its terminal, as an attached answer
// with raw=1 gives it, or writes it to live at once.
type runBytes struct {
	live io.Writer // set before the first add; nil: keep the bytes

	mu sync.Mutex // guards b
	b  []byte
}

// maxRunBytes bounds what is kept: a run that wrote more before its
// terminal could be attached to shows its last bytes.
const maxRunBytes = 4 << 20

func (r *runBytes) add(l client.OutputLine) {
	if l.Stream != "tty" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, l.Line...)
	if !l.Partial {
		r.b = append(r.b, '\n')
	}
	if r.live != nil {
		r.live.Write(r.b)
		r.b = r.b[:0]
		return
	}
	if len(r.b) > 2*maxRunBytes {
		r.b = append(r.b[:0], r.b[len(r.b)-maxRunBytes:]...)
	}
}

func (r *runBytes) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Write(r.b)
}
