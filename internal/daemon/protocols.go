package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/tend-sh/tend/internal/acp"
	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/program"
)

// protocols serves the API's protocol routes (prompt, cancel, permission)
// from the supervisors' protocol instances (docs/protocol.md). An instance
// without protocol is program.ErrNotProtocol, named: `worker:0 does not
// speak a protocol (protocol = "")`; one with no run program.ErrNotRunning
// with its why.
type protocols struct{ d *daemon }

var _ api.Protocols = (*protocols)(nil)

// conn is the current connection of the one instance id.
func (p *protocols) conn(id string) (*acp.Conn, error) {
	ids, ps, err := p.d.mgr.Protocols(id)
	if err != nil {
		return nil, err
	}
	if len(ps) != 1 {
		return nil, fmt.Errorf("%w: %s names %d instances", program.ErrInvalid, id, len(ps))
	}
	if ps[0] == nil {
		return nil, fmt.Errorf("%s %w", ids[0], program.ErrNotProtocol)
	}
	c, err := ps[0].Conn()
	if err != nil && p.alive(ids[0]) {
		// Started, adopted or carried over an upgrade a moment ago: its
		// connection comes at once (or the run ends, and the wait with it).
		ctx, cancel := context.WithTimeout(context.Background(), connWait)
		c, err = ps[0].WaitConn(ctx)
		cancel()
	}
	if err != nil {
		if st, serr := p.d.broker.Status(ids[0]); serr == nil && st.Why != "" {
			return nil, fmt.Errorf("%s is %w: %s", ids[0], program.ErrNotRunning, st.Why)
		}
		return nil, err
	}
	return c, nil
}

// connWait bounds how long a request waits for the connection of a run
// that is alive but not yet spoken to.
const connWait = 10 * time.Second

// alive says whether instance id has a run: starting or running.
func (p *protocols) alive(id string) bool {
	st, err := p.d.broker.Status(id)
	return err == nil && (st.State == program.StateStarting || st.State == program.StateRunning) && st.PID != nil
}

type turn struct{ t *acp.Turn }

func (t turn) PromptID() string { return t.t.ID }
func (t turn) Next(ctx context.Context) ([]program.TurnUpdate, string, error) {
	return t.t.Next(ctx)
}

// Prompt implements api.Protocols.
func (p *protocols) Prompt(id, text string, follow bool) (api.Turn, error) {
	c, err := p.conn(id)
	if err != nil {
		return nil, err
	}
	t, err := c.Prompt(text, follow)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	return turn{t}, nil
}

// Cancel implements api.Protocols.
func (p *protocols) Cancel(id string) error {
	c, err := p.conn(id)
	if err != nil {
		return err
	}
	if err := c.Cancel(); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// Answer implements api.Protocols.
func (p *protocols) Answer(id string, a program.PermissionAnswer) (program.PermissionAnswer, error) {
	c, err := p.conn(id)
	if err != nil {
		return a, err
	}
	w, err := c.Answer(a.RequestID, a.OptionID, a.Cancel)
	if err != nil {
		return a, fmt.Errorf("%s: %w", id, err)
	}
	a.RequestID = w.RequestID
	return a, nil
}
