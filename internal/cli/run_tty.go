package cli

import (
	"context"
	"errors"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// runTerminal is tend run --tty --attach: the program runs in a terminal
// tend holds, and this command is attached to it as tend attach is. Two
// connections: POST /v1/programs?attach=1 adds the program, holds its
// logs and reports how its run ended (its output lines, the terminal's
// bytes, are not needed here and are dropped), and the terminal attach
// (attachTerminal) draws the screen and carries the keys. The run's end
// ends both and is our exit status; a detach (Ctrl-P Ctrl-Q) ends the
// attach alone: we exit 0 and the run goes on (and with --rm is removed
// by the daemon once it ends).
func (e *env) runTerminal(c *client.Client, body map[string]any) error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	attached := make(chan error, 1)
	var id string
	end, err := c.Attach(ctx, body, func(a program.Added) {
		id = a.IDs[0]
		go func() {
			err := e.attachTerminal(ctx, c, id)
			attached <- err
			if err != nil || ctx.Err() == nil {
				cancel() // detached, or could not attach: leave the run be
			}
		}()
	}, nil)
	if err != nil {
		select {
		case aerr := <-attached:
			if errors.Is(aerr, errDetached) {
				return nil
			}
			if aerr != nil {
				return aerr
			}
		default:
		}
		return err
	}
	cancel()
	<-attached // the terminal's last screen is drawn
	return e.runEnded(id, end)
}

// errDetached is what attachTerminal returns when the user detached.
var errDetached = errors.New("detached")
