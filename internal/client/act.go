package client

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// ActOptions qualify an operator action (docs/cli.md, docs/api.md). The zero value asks
// the daemon only to take the request.
type ActOptions struct {
	// Wait: the daemon answers once every instance is done (running and
	// ready for start, every process gone for stop, both for restart), with
	// their statuses and the ones that failed (?wait=1).
	Wait bool
	// Now: a stop or restart skips the wait for an agent's turn to end
	// (turn_grace, docs/operations.md#turn-aware-stop), also ending such a wait under way (?now=1).
	Now bool
	// Timeout bounds a Wait on the daemon's side (?timeout=D): the
	// instances not done by then come back in Failed. 0: no bound but ctx.
	Timeout time.Duration
	// Labels narrow sel to the instances whose program has every one of
	// them (?label=KEY=VALUE).
	Labels program.LabelSelector
}

// AnswerGrace is how much longer than ActOptions.Timeout the client waits
// for the daemon's answer before it gives up on a daemon that does not
// answer at all.
const AnswerGrace = 10 * time.Second

// Act runs an operator action, verb "start", "stop" or "restart", on what
// sel names ("all", "name", "name:k").
func (c *Client) Act(ctx context.Context, verb, sel string, opts ActOptions) (program.ActResult, error) {
	switch verb {
	case "start", "stop", "restart":
	default:
		return program.ActResult{}, fmt.Errorf("client: unknown action %q", verb)
	}
	q := url.Values{}
	if opts.Wait {
		q.Set("wait", "1")
		if opts.Timeout > 0 {
			q.Set("timeout", opts.Timeout.String())
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, opts.Timeout+AnswerGrace)
			defer cancel()
		}
	}
	if opts.Now {
		q.Set("now", "1")
	}
	if len(opts.Labels) > 0 {
		q["label"] = opts.Labels.Strings()
	}
	var out program.ActResult
	err := c.call(ctx, "POST", "/v1/programs/"+url.PathEscape(sel)+"/"+verb, q, nil, &out)
	return out, err
}

// Start starts what sel names ("all", "name", "name:k") without waiting;
// it returns the ids.
func (c *Client) Start(sel string) ([]string, error) { return c.act(sel, "start") }

// Stop stops what sel names and returns the ids once the daemon took it.
func (c *Client) Stop(sel string) ([]string, error) { return c.act(sel, "stop") }

// Restart restarts what sel names without waiting; it returns the ids.
func (c *Client) Restart(sel string) ([]string, error) { return c.act(sel, "restart") }

func (c *Client) act(sel, verb string) ([]string, error) {
	res, err := c.Act(context.Background(), verb, sel, ActOptions{})
	return res.IDs, err
}

// Scale sets a program's instance count; it returns the ids the program
// has then.
func (c *Client) Scale(name string, instances int) ([]string, error) {
	var out struct {
		IDs []string `json:"ids"`
	}
	body := map[string]int{"instances": instances}
	err := c.call(context.Background(), "POST", "/v1/programs/"+url.PathEscape(name)+"/scale", nil, body, &out)
	return out.IDs, err
}
