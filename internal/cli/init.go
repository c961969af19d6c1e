package cli

import (
	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/initproc"
)

func (e *env) initCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init [--] CMD [ARGS...]",
		Short: "run one command as a container's PID 1: forward signals, reap orphans, exit with its status",
		Long: "Runs CMD as the only child and stays PID 1 for it (the tini job): every catchable signal\n" +
			"but SIGCHLD and SIGURG goes to its process group, every orphan is reaped, and tend exits\n" +
			"with its exit code or 128+signal. For a whole fleet with restart accounting, use tend up\n" +
			"as the entrypoint instead.",
		Args: cobra.MinimumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if code := initproc.Run(args, e.stderr); code != 0 {
				return exitStatus(code)
			}
			return nil
		}),
	}
	cmd.Flags().SetInterspersed(false) // CMD's own flags are CMD's
	return cmd
}

// exitStatus passes a child's exit status through as tend's own.
type exitStatus int

func (s exitStatus) Error() string { return "" }
