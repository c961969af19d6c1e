package cli

import "github.com/spf13/cobra"

func (e *env) stopCmd() *cobra.Command {
	return e.actionCmd("stop", "stop what ID names and wait until it has stopped",
		func(e *env, sel string) ([]string, error) {
			c, err := e.client()
			if err != nil {
				return nil, err
			}
			return c.Stop(sel)
		})
}
