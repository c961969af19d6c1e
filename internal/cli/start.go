package cli

import "github.com/spf13/cobra"

func (e *env) startCmd() *cobra.Command {
	cmd, _ := e.actionCmd("start", "start what ID names and wait until it runs",
		"Start one instance (NAME:K), every instance of a program (NAME) or the fleet (all), and\n"+
			"wait until each is running (and ready, with ready = \"notify\") or has failed. Prints one\n"+
			"line per instance; exit 1, with the why on stderr, if any did not get there.")
	return cmd
}
