package cli

import "github.com/spf13/cobra"

func (e *env) stopCmd() *cobra.Command {
	cmd, f := e.actionCmd("stop", "stop what ID names and wait until it has stopped",
		"Stop one instance (NAME:K), every instance of a program (NAME) or the fleet (all), and\n"+
			"wait until every process of each is gone. An agent in a turn is given its turn_grace\n"+
			"first; --now skips that wait (and ends one under way).")
	cmd.Use = "stop [ID|NAME|all] [-l KEY=VALUE]... [--now] [--no-wait] [--timeout D]"
	cmd.Flags().BoolVar(&f.now, "now", false, "do not wait for an agent's turn to end (turn_grace)")
	return cmd
}
