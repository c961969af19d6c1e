package cli

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// waitTargets are what --until accepts: a state or a lifecycle.
var waitTargets = []string{
	program.StateStarting, program.StateRunning, program.StateBackoff, program.StateStopping,
	program.StateStopped, program.StateExited, program.StateFatal,
	program.LifecycleIdle, program.LifecycleDone, program.LifecycleError,
}

func (e *env) waitCmd() *cobra.Command {
	var until string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID --until STATE_OR_LIFECYCLE [--timeout D]",
		Short: "block until an instance (or every instance of a program) reaches a state or lifecycle",
		Long: "Blocks until ID is in the given state (starting, running, backoff, stopping, stopped,\n" +
			"exited, fatal) or lifecycle (running, idle, done, error); exit 1 on timeout, 3 for an\n" +
			"unknown id. A daemon that is not up yet is waited for too.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(waitTargets, until) {
				return usageError{fmt.Errorf("--until %q: want one of %v", until, waitTargets)}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			return waitUntil(c, args[0], until, time.Now().Add(timeout))
		}),
	}
	cmd.Flags().StringVar(&until, "until", "", "the state or lifecycle to wait for (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long (exit 1)")
	_ = cmd.MarkFlagRequired("until")
	return cmd
}

// waitUntil polls the daemon every 50 ms: cheap on the unix socket, and it
// also rides out a daemon that is still starting.
func waitUntil(c *client.Client, sel, until string, deadline time.Time) error {
	for {
		done, err := reached(c, sel, until)
		switch {
		case done:
			return nil
		case err != nil && !errors.Is(err, client.ErrNoDaemon):
			return err
		case time.Now().After(deadline):
			if err != nil {
				return err
			}
			return fmt.Errorf("timed out waiting for %s to be %s", sel, until)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reached reports whether every instance sel names is in the target.
func reached(c *client.Client, sel, until string) (bool, error) {
	if _, _, ok := program.SplitID(sel); ok {
		st, err := c.Status(sel)
		return err == nil && matches(&st, until), err
	}
	s, err := program.ParseSelector(sel)
	if err != nil {
		return false, fmt.Errorf("%w: %v", program.ErrNotFound, err)
	}
	list, err := c.List(false)
	if err != nil {
		return false, err
	}
	n := 0
	for i := range list {
		if s.All || list[i].Program == s.Program {
			n++
			if !matches(&list[i], until) {
				return false, nil
			}
		}
	}
	if n == 0 && !s.All {
		return false, fmt.Errorf("%w: %s", program.ErrNotFound, sel)
	}
	return true, nil
}

func matches(st *program.Status, until string) bool {
	return st.State == until || st.Lifecycle == until
}
