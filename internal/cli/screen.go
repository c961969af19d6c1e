package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) screenCmd() *cobra.Command {
	var ansi, jsonOut bool
	var history int
	cmd := &cobra.Command{
		Use:   "screen ID [--history N] [--ansi] [--json]",
		Short: "print what a terminal program shows now",
		Long: "Print the screen of a tty instance (a program with tty = true) as a terminal shows it,\n" +
			"one line per row with trailing spaces trimmed, as tmux capture-pane -p prints a pane.\n" +
			"--ansi keeps colours and attributes as escape sequences; --json prints the API's object\n" +
			"{\"cols\", \"rows\", \"cursor\", \"lines\", \"title\", \"changed_at\", \"running\"}. Of a run that has\n" +
			"ended it prints the last screen. --history N prints up to N of the lines that scrolled off\n" +
			"the top above the screen (tmux capture-pane -p -S -N; at most tty_history are kept), and\n" +
			"--json then has them as \"history\". A bare NAME is its instance when it has only one.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if history < 0 {
				return usageError{fmt.Errorf("screen: --history %d: want a number of lines, 0 or more", history)}
			}
			if jsonOut && history > 0 {
				raw, err := c.ScreenHistoryJSON(args[0], ansi, history)
				if err != nil {
					return err
				}
				return writeIndented(e.stdout, raw)
			}
			if jsonOut {
				raw, err := c.ScreenJSON(args[0], ansi)
				if err != nil {
					return err
				}
				return writeIndented(e.stdout, raw)
			}
			// The daemon renders the rows, escaped as every human output
			// is (--ansi keeping its SGR colours; docs/trust.md), as it
			// renders tend ps's table: nothing to decode here.
			text, err := c.ScreenText(args[0], ansi, history)
			if err != nil {
				return err
			}
			_, err = e.stdout.Write(text)
			return err
		}),
	}
	cmd.Flags().BoolVar(&ansi, "ansi", false, "keep colours and attributes (escape sequences)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the screen object as JSON")
	cmd.Flags().IntVar(&history, "history", 0, "print up to `N` lines of history above the screen")
	return cmd
}
