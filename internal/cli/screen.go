package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/human"
)

func (e *env) screenCmd() *cobra.Command {
	var ansi, jsonOut bool
	cmd := &cobra.Command{
		Use:   "screen ID [--ansi] [--json]",
		Short: "print what a terminal program shows now",
		Long: "Print the screen of a tty instance (a program with tty = true) as a terminal shows it,\n" +
			"one line per row with trailing spaces trimmed, as tmux capture-pane -p prints a pane.\n" +
			"--ansi keeps colours and attributes as escape sequences; --json prints the API's object\n" +
			"{\"cols\", \"rows\", \"cursor\", \"lines\", \"title\", \"changed_at\", \"running\"}. Of a run that has\n" +
			"ended it prints the last screen. A bare NAME is its instance when it has only one.",
		Args: cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if jsonOut {
				raw, err := c.ScreenJSON(args[0], ansi)
				if err != nil {
					return err
				}
				return writeIndented(e.stdout, raw)
			}
			scr, err := c.Screen(args[0], ansi)
			if err != nil {
				return err
			}
			rows := scr.Lines
			if ansi {
				rows = scr.ANSI
			}
			// The emulator keeps no control in a cell; the rows are escaped
			// all the same (--ansi keeping its SGR colours), as every
			// human output is (docs/trust.md).
			escape := human.Escape
			if ansi {
				escape = human.EscapeColour
			}
			var b strings.Builder
			for _, row := range rows {
				b.WriteString(escape(row))
				b.WriteByte('\n')
			}
			_, err = e.stdout.Write([]byte(b.String()))
			return err
		}),
	}
	cmd.Flags().BoolVar(&ansi, "ansi", false, "keep colours and attributes (escape sequences)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the screen object as JSON")
	return cmd
}
