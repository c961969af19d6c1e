package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) startCmd() *cobra.Command {
	return e.actionCmd("start", "start what ID names (all, NAME or NAME:K)",
		func(e *env, sel string) ([]string, error) {
			c, err := e.client()
			if err != nil {
				return nil, err
			}
			return c.Start(sel)
		})
}

// actionCmd is an operator action on an id: start, stop or restart. It
// prints the ids acted on, one a line.
func (e *env) actionCmd(verb, short string, do func(e *env, sel string) ([]string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			ids, err := do(e, args[0])
			if err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Fprintln(e.stdout, id)
			}
			return nil
		}),
	}
}
