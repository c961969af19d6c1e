package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func (e *env) logsCmd() *cobra.Command {
	var (
		follow bool
		lines  int
	)
	cmd := &cobra.Command{
		Use:   "logs ID [-f] [-n N]",
		Short: "print an instance's captured output",
		Args:  cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return usageError{errors.New("logs: -n wants a number of lines from 0")}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			return c.Logs(e.ctx, args[0], lines, follow, e.stdout)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output")
	cmd.Flags().IntVarP(&lines, "lines", "n", 100, "how many of the last lines to print")
	return cmd
}
