package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print tend's version",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(e.stdout, "tend %s (%s %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}),
	}
}
