package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) addCmd() *cobra.Command {
	var (
		instances int
		agent     bool
		restart   string
		labels    []string
	)
	cmd := &cobra.Command{
		Use:   "add NAME [--instances N] [--agent] [--restart POLICY] [-l KEY=VALUE]... -- CMD ARGS...",
		Short: "add a program to the running daemon and start it",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			name, argv, err := splitAdd(args, cmd.ArgsLenAtDash())
			if err != nil {
				return usageError{err}
			}
			body := map[string]any{"name": name, "command": argv}
			if len(labels) > 0 {
				sel, err := parseLabels(labels)
				if err != nil {
					return err
				}
				m := map[string]string{}
				for _, l := range sel {
					m[l.Key] = l.Value
				}
				body["labels"] = m
			}
			// Only what was given: the daemon's defaults fill in the rest.
			if cmd.Flags().Changed("instances") {
				body["instances"] = instances
			}
			if cmd.Flags().Changed("agent") {
				body["agent"] = agent
			}
			if cmd.Flags().Changed("restart") {
				body["restart"] = restart
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ids, err := c.Add(body)
			if err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Fprintln(e.stdout, id)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&instances, "instances", 1, "how many instances to run")
	f.BoolVar(&agent, "agent", false, "the program is an AI agent (status reports turns)")
	f.StringVar(&restart, "restart", "always", "restart policy: always, on-failure or never")
	f.StringArrayVarP(&labels, "label", "l", nil, "label the program `KEY=VALUE` (repeatable)")
	return cmd
}

// splitAdd splits "NAME -- CMD ARGS..." (dash is the index of the first
// argument after "--", -1 without one).
func splitAdd(args []string, dash int) (name string, argv []string, err error) {
	switch {
	case dash == 0:
		return "", nil, errors.New("add: NAME goes before --")
	case dash > 1:
		return "", nil, fmt.Errorf("add: one NAME before --, got %q", args[:dash])
	case len(args) < 2:
		return "", nil, errors.New("add: missing the command (tend add NAME -- CMD ARGS)")
	}
	return args[0], args[1:], nil
}
