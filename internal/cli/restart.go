package cli

import "github.com/spf13/cobra"

func (e *env) restartCmd() *cobra.Command {
	cmd, f := e.actionCmd("restart", "restart what ID names and wait until it runs again",
		"Restart one instance (NAME:K), every instance of a program (NAME) or the fleet (all): an\n"+
			"operator restart, no crash counted. Waits until the old run's processes are gone and\n"+
			"the new run is running (and ready). --rolling restarts one instance at a time, each\n"+
			"running and ready before the next is touched; a failed one stops the roll. An agent in\n"+
			"a turn is given its turn_grace first; --now skips that wait.")
	cmd.Use = "restart [ID|NAME|all] [-l KEY=VALUE]... [--rolling] [--now] [--no-wait] [--timeout D]"
	cmd.Flags().BoolVar(&f.now, "now", false, "do not wait for an agent's turn to end (turn_grace)")
	cmd.Flags().BoolVar(&f.rolling, "rolling", false, "one instance at a time, each running and ready before the next")
	return cmd
}
