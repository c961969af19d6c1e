package cli

import (
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"
)

func (e *env) dashboardCmd() *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard [--open]",
		Short: "print a one-time login link to the web dashboard",
		Long: "Print a login link to the dashboard the daemon serves on [daemon] http. The link works\n" +
			"once, within a minute; it logs the browser in for 12 hours.",
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			url, err := c.DashboardURL()
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, url)
			if open {
				openBrowser(url, e)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in a browser (with xdg-open)")
	return cmd
}

// openBrowser hands url to xdg-open without waiting for it: some setups
// keep it running as long as the browser. The link is printed either way.
func openBrowser(url string, e *env) {
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		fmt.Fprintln(e.stderr, "tend: xdg-open not found; open the link above in a browser")
		return
	}
	cmd := exec.Command(path, url)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "tend: xdg-open: %v; open the link above in a browser\n", err)
		return
	}
	cmd.Process.Release()
}
