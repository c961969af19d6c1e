package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// actFlags are the flags of start, stop and restart.
type actFlags struct {
	labels  []string // -l KEY=VALUE
	noWait  bool
	now     bool // stop and restart only
	rolling bool // restart only
	timeout time.Duration
}

// actionCmd is an operator action on what an id names: start, stop or
// restart. By default it waits until done (docs/cli.md#verbs-that-wait) and prints one line per
// instance; --no-wait prints the ids acted on as soon as the daemon has
// taken the request.
func (e *env) actionCmd(verb, short, long string) (*cobra.Command, *actFlags) {
	f := &actFlags{}
	cmd := &cobra.Command{
		Use:   verb + " [ID|NAME|all] [-l KEY=VALUE]... [--no-wait] [--timeout D]",
		Short: short,
		Long:  long + "\n-l KEY=VALUE (repeatable) acts on the instances whose program has the label (without\nan ID: every one that has it).",
		Args:  cobra.MaximumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			sel, labels, err := selection(verb, args, f.labels)
			if err != nil {
				return err
			}
			if f.noWait && (f.rolling || cmd.Flags().Changed("timeout")) {
				return usageError{fmt.Errorf("%s: --no-wait cannot go with --rolling or --timeout", verb)}
			}
			if f.timeout < 0 {
				return usageError{fmt.Errorf("%s: --timeout wants a positive duration such as 30s (0: no bound)", verb)}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			if f.rolling {
				return e.rollingRestart(c, sel, labels, f)
			}
			return e.act(c, verb, sel, labels, f)
		}),
	}
	labelFlag(cmd, &f.labels)
	fl := cmd.Flags()
	fl.BoolVar(&f.noWait, "no-wait", false, "return once the daemon has taken the request; print the ids")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up waiting after `D` (exit 1); 0: wait until done")
	return cmd, f
}

// act runs one action and reports it.
func (e *env) act(c *client.Client, verb, sel string, labels program.LabelSelector, f *actFlags) error {
	opts := client.ActOptions{Wait: !f.noWait, Now: f.now, Timeout: f.timeout, Labels: labels}
	res, err := c.Act(e.ctx, verb, sel, opts)
	if err != nil {
		return answerError(err, f.timeout)
	}
	if len(res.IDs) == 0 && len(labels) > 0 {
		e.noMatch(sel, labels)
		return nil
	}
	if f.noWait {
		for _, id := range res.IDs {
			fmt.Fprintln(e.stdout, id)
		}
		return nil
	}
	e.fillStatuses(c, sel, labels, &res)
	for _, id := range res.IDs {
		fmt.Fprintln(e.stdout, actLine(id, res.Statuses))
	}
	if len(res.Failed) > 0 {
		return actFailed{failed: res.Failed}
	}
	return nil
}

// fillStatuses asks for the statuses an answer lacks: a daemon that took
// the request without waiting answers only the ids.
func (e *env) fillStatuses(c *client.Client, sel string, labels program.LabelSelector, res *program.ActResult) {
	for _, id := range res.IDs {
		if !slices.ContainsFunc(res.Statuses, func(st program.Status) bool { return st.ID == id }) {
			if list, err := c.Select(e.ctx, sel, labels); err == nil {
				res.Statuses = list
			}
			return
		}
	}
}

// actLine is one instance's line after an action: "worker:0 running pid
// 4242", "worker:0 running pid 4242, not ready", "worker:1 stopped".
func actLine(id string, statuses []program.Status) string {
	i := slices.IndexFunc(statuses, func(st program.Status) bool { return st.ID == id })
	if i < 0 {
		return id + " unknown"
	}
	st := &statuses[i]
	line := id + " " + st.State
	if st.Alive() {
		line += fmt.Sprintf(" pid %d", *st.PID)
		if st.State == program.StateRunning && !st.Ready {
			line += ", not ready"
		}
	}
	return line
}

// answerError explains a request that got no answer in time.
func answerError(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && timeout > 0 {
		return fmt.Errorf("the daemon did not answer within --timeout %s and %s more", timeout, client.AnswerGrace)
	}
	return err
}

// actFailed reports the instances an action did not bring where it was
// asked: one "tend: ID: why" line each, then (for a roll that stopped)
// what was left untouched (exit 1).
type actFailed struct {
	failed []program.ActFailure
	left   []string // a rolling restart's instances not restarted
}

func (a actFailed) Error() string {
	var lines []string
	for _, f := range a.failed {
		lines = append(lines, f.ID+": "+oneLine(f.Why))
	}
	if len(a.left) > 0 {
		lines = append(lines, "rolling restart stopped; not restarted: "+strings.Join(a.left, ", "))
	}
	return strings.Join(lines, "\n")
}

// lines are the stderr lines of a, each starting "tend: ".
func (a actFailed) lines() string {
	var b strings.Builder
	for l := range strings.SplitSeq(a.Error(), "\n") {
		b.WriteString("tend: " + l + "\n")
	}
	return b.String()
}
