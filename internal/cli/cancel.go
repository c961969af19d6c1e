package cli

import (
	"github.com/spf13/cobra"
)

func (e *env) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID|NAME",
		Short: "cancel a protocol agent's turn (session/cancel)",
		Long: "Send session/cancel for the turn under way of a protocol agent (protocol = \"acp\"):\n" +
			"the turn ends with stop reason cancelled, and a permission request it left open is\n" +
			"answered cancelled. A bare NAME cancels the turn of every instance.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			ids, err := protocolIDs(c, args[0])
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := c.Cancel(id); err != nil {
					return err
				}
			}
			return nil
		}),
	}
}
