package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// cgroupHoldCmd is the hidden verb `tend cgroup-hold`: the process tend up
// starts, under a systemd service, in the scope that holds its runs'
// groups, so that the scope lives while no run does (internal/cgroup's
// scope.go). It only waits, and ends on SIGTERM (the daemon's clean stop,
// or systemd stopping the scope).
func (e *env) cgroupHoldCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "cgroup-hold",
		Short:  "hold the systemd scope of tend's runs (started by tend up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			<-sig
			return nil
		}),
	}
}
