package cli

import (
	"github.com/spf13/cobra"
)

func (e *env) denyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "deny ID",
		Short: "answer a protocol agent's permission request with its first reject option",
		Args:  cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			return e.answer(args[0], "", "reject_once")
		}),
	}
}
