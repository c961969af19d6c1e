package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
)

func (e *env) psCmd() *cobra.Command {
	var agents, jsonOut, showLabels bool
	var rawLabels []string
	cmd := &cobra.Command{
		Use:   "ps [--agents] [-l KEY=VALUE]... [--show-labels] [--json]",
		Short: "list every instance and its state",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			labels, err := parseLabels(rawLabels)
			if err != nil {
				return err
			}
			q := client.ListQuery{AgentsOnly: agents, Labels: labels, ShowLabels: showLabels}
			c, err := e.client()
			if err != nil {
				return err
			}
			// Neither form decodes the listing: the daemon renders the
			// table, and the JSON is only indented, so a thousand
			// instances cost the CLI next to nothing.
			if jsonOut {
				raw, err := c.ListJSONOf(q)
				if err != nil {
					return err
				}
				return writeIndented(e.stdout, raw)
			}
			table, err := c.TableOf(q, termWidth(e.stdout))
			if err != nil {
				return err
			}
			// The daemon escapes the table's cells; so does this, for a
			// daemon from before it did (docs/trust.md).
			_, err = io.WriteString(e.stdout, human.EscapeText(string(table)))
			return err
		}),
	}
	cmd.Flags().BoolVar(&agents, "agents", false, "list only the agents")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON array of status objects")
	cmd.Flags().BoolVar(&showLabels, "show-labels", false, "add a LABELS column (KEY=VALUE,...)")
	labelFlag(cmd, &rawLabels)
	return cmd
}

// termWidth is the width to fit lines in: $COLUMNS, else the terminal's
// width if w is one, else 120.
func termWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return 120
}

// writeIndented writes the daemon's JSON answer raw indented, with a final
// newline, as writeJSON would write it decoded. Like every JSON the CLI
// prints it has its C1 and bidi controls as \u escapes (human.EscapeJSON):
// the same text, but none a terminal acts on.
func writeIndented(w io.Writer, raw []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("reading the daemon's answer: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(human.EscapeJSON(out.Bytes()))
	return err
}

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(human.EscapeJSON(b), '\n'))
	return err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
