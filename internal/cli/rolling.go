package cli

import (
	"fmt"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// rollingRestart restarts what sel names one instance at a time: each is
// restarted with a wait and must be running and ready before the next is
// touched, so at most one is ever down. A failure, or the --timeout
// passing, stops the roll and names the instances left as they were.
func (e *env) rollingRestart(c *client.Client, sel string, labels program.LabelSelector, f *actFlags) error {
	list, err := c.Select(e.ctx, sel, labels)
	if err != nil {
		return err
	}
	if len(list) == 0 && len(labels) > 0 {
		e.noMatch(sel, labels)
		return nil
	}
	var deadline time.Time
	if f.timeout > 0 {
		deadline = time.Now().Add(f.timeout)
	}
	ids := make([]string, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	for i, id := range ids {
		opts := client.ActOptions{Wait: true, Now: f.now}
		if !deadline.IsZero() {
			if opts.Timeout = time.Until(deadline); opts.Timeout <= 0 {
				return actFailed{left: ids[i:], failed: []program.ActFailure{{ID: id, Why: fmt.Sprintf("not restarted: --timeout %s passed", f.timeout)}}}
			}
		}
		res, err := c.Act(e.ctx, "restart", id, opts)
		if err != nil {
			return answerError(err, opts.Timeout)
		}
		e.fillStatuses(c, id, nil, &res)
		fmt.Fprintln(e.stdout, actLine(id, res.Statuses))
		failed := res.Failed
		if len(failed) == 0 {
			failed = notReady(id, res.Statuses)
		}
		if len(failed) > 0 {
			return actFailed{failed: failed, left: ids[i+1:]}
		}
	}
	return nil
}

// notReady is the failure of an instance that a restart left neither
// running nor ready, which the daemon should have said itself: the roll
// must not go on past it.
func notReady(id string, statuses []program.Status) []program.ActFailure {
	for _, st := range statuses {
		if st.ID == id && (st.State != program.StateRunning || !st.Ready) {
			why := st.State
			if st.Why != "" {
				why += ": " + st.Why
			}
			return []program.ActFailure{{ID: id, Why: "not running and ready after the restart (" + why + ")"}}
		}
	}
	return nil
}
