package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// downTimeout bounds how long down waits for the daemon to stop answering
// (its instances' stop grace periods run meanwhile).
var downTimeout = 60 * time.Second

func (e *env) downCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "stop every instance and the daemon",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.Shutdown(); err != nil {
				return err
			}
			deadline := time.NewTimer(downTimeout)
			defer deadline.Stop()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := c.Health(); err != nil {
					fmt.Fprintln(e.stdout, "daemon stopped")
					return nil
				}
				select {
				case <-e.ctx.Done():
					return e.ctx.Err()
				case <-deadline.C:
					return fmt.Errorf("down: the daemon at %s still answers after %s", c.Socket(), downTimeout)
				case <-tick.C:
				}
			}
		}),
	}
}
