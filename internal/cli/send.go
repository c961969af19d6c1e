package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/program"
)

func (e *env) sendCmd() *cobra.Command {
	var in program.Input
	var keys []string
	cmd := &cobra.Command{
		Use:   "send ID|NAME|all [TEXT...] [--literal] [--keys K,...] [--enter]",
		Short: "type text and keys into a terminal program",
		Long: "Type TEXT (the arguments joined by spaces) into the terminal of a tty instance, then\n" +
			"the --keys, then Enter with --enter. Text goes in as a bracketed paste when the program\n" +
			"turned that mode on (right for a prompt to an agent: a multi-line prompt is not\n" +
			"submitted line by line); --literal types it as keystrokes instead, as tmux send-keys -l\n" +
			"does, for programs such as vim that take a paste as text to insert.\n\n" +
			"Keys are named as tmux send-keys names them: Enter, Escape, Tab, BSpace, Up, Down, Left,\n" +
			"Right, Home, End, PageUp, PageDown, F1...F12, C-a...C-z, M-x, S-Up, ...; an item that is\n" +
			"no key name is typed as it is written, as send-keys does (--keys ':set nu',Enter).\n" +
			"--keys is split at commas and may be repeated; --keys , (a comma alone) types a comma.\n" +
			"A bare NAME or all types into every running tty instance it names. At most 64 KiB of\n" +
			"text and keys per send.\n\n" +
			"  tend send planner:0 'fix the failing test' --enter\n" +
			"  tend send vim:0 --literal ':q!' --enter\n" +
			"  tend send vim:0 --keys Escape,':set nu',Enter\n" +
			"  tend send repl:0 --keys C-c",
		Args: cobra.MinimumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			in.Text = strings.Join(args[1:], " ")
			in.Keys = splitKeys(keys)
			if slices.Contains(in.Keys, "") {
				return usageError{fmt.Errorf("send: --keys %q: an empty key (two commas in a row?); --keys , types a comma", strings.Join(keys, " --keys "))}
			}
			if in.Text == "" && len(in.Keys) == 0 && !in.Enter {
				return usageError{errors.New("send: nothing to type: give TEXT, --keys or --enter")}
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
	f.BoolVar(&in.Literal, "literal", false, "type the text as keystrokes, not as a bracketed paste (tmux send-keys -l)")
	f.StringArrayVar(&keys, "keys", nil, "`KEYS` to press after the text, comma-separated (Enter,C-c,Up,...); an item that is no key name is typed as written; repeatable; , alone is a comma")
	return cmd
}

// splitKeys reads --keys values: each split at its commas, except a value
// that is a comma alone, which is the comma key (docs/cli.md).
func splitKeys(values []string) []string {
	var keys []string
	for _, v := range values {
		if v == "," {
			keys = append(keys, v)
			continue
		}
		keys = append(keys, strings.Split(v, ",")...)
	}
	return keys
}
