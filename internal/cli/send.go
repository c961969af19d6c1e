package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/program"
)

func (e *env) sendCmd() *cobra.Command {
	var in program.Input
	cmd := &cobra.Command{
		Use:   "send ID|NAME|all [TEXT...] [--enter] [--keys K,...]",
		Short: "type text and keys into a terminal program",
		Long: "Type TEXT (the arguments joined by spaces) into the terminal of a tty instance, then\n" +
			"the --keys, then Enter with --enter. Keys are named as tmux send-keys names them: Enter,\n" +
			"Escape, Tab, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1...F12,\n" +
			"C-a...C-z, M-x, S-Up, ... Text goes in as a bracketed paste when the program turned\n" +
			"that mode on. A bare NAME or all types into every running tty instance it names.\n" +
			"At most 64 KiB of text per send.\n\n" +
			"  tend send planner:0 'fix the failing test' --enter\n" +
			"  tend send repl:0 --keys C-c",
		Args: cobra.MinimumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			in.Text = strings.Join(args[1:], " ")
			if in.Text == "" && len(in.Keys) == 0 && !in.Enter {
				return usageError{errors.New("send: nothing to type: give TEXT, --keys or --enter")}
			}
			if len(in.Text) > program.MaxInput {
				return usageError{fmt.Errorf("send: the text is %d bytes; at most 64 KiB (%d bytes) per send", len(in.Text), program.MaxInput)}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			_, err = c.Input(args[0], in)
			return err
		}),
	}
	f := cmd.Flags()
	f.BoolVar(&in.Enter, "enter", false, "press Enter after the text and keys")
	f.StringSliceVar(&in.Keys, "keys", nil, "named `KEYS` to press after the text, comma-separated (Enter,C-c,Up,...)")
	return cmd
}
