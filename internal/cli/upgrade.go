package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) upgradeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "upgrade",
		Short: "re-execute the daemon's binary in place: same pid, every run kept",
		Long: `Re-execute the daemon's binary (the file now at its path, such as a tend
just installed over the old one) in the same process: the pid stays, every
run stays the daemon's child and keeps running, its sockets, pipes and
the event numbering carry over, and nothing is restarted. The new binary
must run first (tend version): one that does not is refused with the
reason, and the old daemon keeps serving. An upgrade waits for a reload,
add, rm, scale or operator action under way; requests that come meanwhile
are answered by the new binary. It returns once the new binary serves and
prints "upgraded from OLD to NEW". SIGUSR2 to the daemon does the same.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			res, err := c.Upgrade(e.ctx)
			if err != nil {
				return err
			}
			if res.Pending {
				fmt.Fprintf(e.stdout, "upgrading from %s to %s\n", res.From, res.To)
				return nil
			}
			fmt.Fprintf(e.stdout, "upgraded from %s to %s\n", res.From, res.To)
			return nil
		}),
	}
}
