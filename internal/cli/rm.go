package cli

import (
	"fmt"

	"github.com/tend-sh/tend/internal/program"

	"github.com/spf13/cobra"
)

func (e *env) rmCmd() *cobra.Command {
	var rawLabels []string
	var opts program.RemoveOptions
	cmd := &cobra.Command{
		Use:   "rm [NAME|all] [-l KEY=VALUE]... [--keep-logs]",
		Short: "stop every instance of a program and forget it",
		Long: "Stop every instance of program NAME and forget it. -l KEY=VALUE (repeatable) removes\n" +
			"every program that has the label (with NAME: that program if it has it); rm all\n" +
			"needs -l. Its logs go with it (a later program of the same name starts with an\n" +
			"empty log) unless --keep-logs.",
		Args: cobra.MaximumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			labels, err := parseLabels(rawLabels)
			if err != nil {
				return err
			}
			if len(labels) == 0 {
				if len(args) == 0 || args[0] == "all" {
					return usageError{fmt.Errorf("rm: name a program (tend rm NAME), or remove by label (tend rm -l KEY=VALUE)")}
				}
				c, err := e.client()
				if err != nil {
					return err
				}
				if err := c.Remove(args[0], opts); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, "removed", args[0])
				return nil
			}
			name, sel := "", "all"
			if len(args) == 1 && args[0] != "all" {
				name, sel = args[0], args[0]
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			removed, err := c.RemoveMatching(e.ctx, name, labels, opts)
			for _, n := range removed {
				fmt.Fprintln(e.stdout, "removed", n)
			}
			if err == nil && len(removed) == 0 {
				e.noMatch(sel, labels)
			}
			return err
		}),
	}
	labelFlag(cmd, &rawLabels)
	cmd.Flags().BoolVar(&opts.KeepLogs, "keep-logs", false, "keep the program's log files")
	return cmd
}
