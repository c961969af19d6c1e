package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
)

func (e *env) reloadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "re-read the config file; add, remove and restart what changed",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			res, err := c.Reload()
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && apiErr.Status == 400 {
				return configError{apiErr.Message} // file:line: key: msg lines
			}
			if err != nil {
				return err
			}
			printed := false
			for _, group := range []struct {
				label string
				names []string
			}{{"added", res.Added}, {"removed", res.Removed}, {"changed", res.Changed}} {
				if len(group.names) > 0 {
					fmt.Fprintf(e.stdout, "%s: %s\n", group.label, strings.Join(group.names, ", "))
					printed = true
				}
			}
			if !printed {
				fmt.Fprintln(e.stdout, "no changes")
			}
			return nil
		}),
	}
}
