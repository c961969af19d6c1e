package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) rmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "stop every instance of a program and forget it",
		Args:  cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.Remove(args[0]); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "removed", args[0])
			return nil
		}),
	}
}
