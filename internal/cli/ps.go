package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

func (e *env) psCmd() *cobra.Command {
	var agents, jsonOut bool
	cmd := &cobra.Command{
		Use:   "ps [--agents] [--json]",
		Short: "list every instance and its state",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			fetch := c.ListSummary // what the table shows
			if jsonOut {
				fetch = c.List // the whole objects
			}
			list, err := fetch(agents)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(e.stdout, nonNil(list))
			}
			return writeTable(e.stdout, list, termWidth(e.stdout))
		}),
	}
	cmd.Flags().BoolVar(&agents, "agents", false, "list only the agents")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON array of status objects")
	return cmd
}

// psHeader are the table's columns; WHY is last so it can be cut to fit.
var psHeader = []string{"ID", "STATE", "LIFECYCLE", "PID", "UPTIME", "RSS", "CRASHES", "RESTARTS", "WHY"}

// Layout of the ps table.
const (
	psPadding = 2  // spaces between columns
	psMinWhy  = 12 // WHY keeps this many runes even when the other columns overflow
)

// writeTable writes the aligned ps table, cutting WHY so that no line is
// wider than width. When the other columns alone are wider than that, WHY
// keeps psMinWhy runes: a line that overflows beats a reason that is gone.
func writeTable(w io.Writer, list []program.Status, width int) error {
	rows := [][]string{psHeader}
	for i := range list {
		st := &list[i]
		rows = append(rows, []string{
			st.ID, st.State, st.Lifecycle, pidText(st.PID), uptimeText(st),
			rssText(st.RSSBytes), strconv.Itoa(st.CrashCount), restartsText(st.Restarts), st.Why,
		})
	}
	// WHY starts where the other columns end, as tabwriter will lay them out.
	whyAt := 0
	for col := range len(psHeader) - 1 {
		widest := 0
		for _, r := range rows {
			widest = max(widest, utf8.RuneCountInString(r[col]))
		}
		whyAt += widest + psPadding
	}
	tw := tabwriter.NewWriter(w, 0, 8, psPadding, ' ', 0)
	for _, r := range rows {
		r[len(r)-1] = cut(r[len(r)-1], max(width-whyAt, psMinWhy))
		for i, cell := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, cell)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// cut shortens s to at most n runes, marking a cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
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

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
