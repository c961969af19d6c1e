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

// waitTargets is what --until accepts: the states and lifecycles, once
// each ("running" is both).
func waitTargets() []string {
	out := program.States()
	for _, l := range program.Lifecycles() {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func (e *env) waitCmd() *cobra.Command {
	var until string
	var timeout time.Duration
	var rawLabels []string
	cmd := &cobra.Command{
		Use:   "wait [ID|NAME|all] [-l KEY=VALUE]... --until STATE_OR_LIFECYCLE [--timeout D]",
		Short: "block until an instance (or every instance of a program, or all) reaches a state or lifecycle",
		Long: "Blocks until ID is in the given state (" + strings.Join(program.States()[:5], ", ") + ",\n" +
			strings.Join(program.States()[5:], ", ") + ") or lifecycle (" + strings.Join(program.Lifecycles(), ", ") + "); for NAME or all, every instance\n" +
			"must get there. Exit 1 on timeout, naming the instances that did not; 3 for an unknown\n" +
			"id. A daemon that is not up yet is waited for too. -l waits for the instances whose\n" +
			"program has the label (without an ID: every one that has it); exit 3 if none has.",
		Args: cobra.MaximumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			sel, labels, err := selection("wait", args, rawLabels)
			if err != nil {
				return err
			}
			if !slices.Contains(waitTargets(), until) {
				return usageError{fmt.Errorf("--until %q: want one of %v", until, waitTargets())}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			return waitUntil(c, sel, labels, until, timeout)
		}),
	}
	labelFlag(cmd, &rawLabels)
	cmd.Flags().StringVar(&until, "until", "", "the `STATE_OR_LIFECYCLE` to wait for (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after `D` (exit 1)")
	_ = cmd.MarkFlagRequired("until")
	return cmd
}

// waitUntil polls the daemon every 50 ms: cheap on the unix socket, and it
// also rides out a daemon that is still starting. Every instance sel names
// must get there; on timeout the error names the ones that did not.
func waitUntil(c *client.Client, sel string, labels program.LabelSelector, until string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind, err := behind(c, sel, labels, until)
		switch {
		case err == nil && len(behind) == 0:
			return nil
		case err != nil && !errors.Is(err, client.ErrNoDaemon):
			return err
		case time.Now().After(deadline):
			if err != nil {
				return err
			}
			return fmt.Errorf("timed out after %s waiting for %s to be %s: %s", timeout, sel, until, strings.Join(behind, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// behind lists the instances sel names that are not in the target yet, as
// "ID (STATE)" (or "ID (LIFECYCLE)" when until is a lifecycle).
func behind(c *client.Client, sel string, labels program.LabelSelector, until string) ([]string, error) {
	list, err := c.Select(context.Background(), sel, labels)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 && len(labels) > 0 {
		return nil, noMatchError{noMatchText(sel, labels)}
	}
	byLifecycle := !slices.Contains(program.States(), until)
	var out []string
	for i := range list {
		st := &list[i]
		if st.State == until || st.Lifecycle == until {
			continue
		}
		now := st.State
		if byLifecycle {
			now = st.Lifecycle
		}
		out = append(out, fmt.Sprintf("%s (%s)", st.ID, now))
	}
	return out, nil
}
