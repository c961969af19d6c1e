package cli

import "github.com/spf13/cobra"

func (e *env) restartCmd() *cobra.Command {
	return e.actionCmd("restart", "restart what ID names (an operator restart: no crash counted)",
		func(e *env, sel string) ([]string, error) {
			c, err := e.client()
			if err != nil {
				return nil, err
			}
			return c.Restart(sel)
		})
}
