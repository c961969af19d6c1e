package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

func (e *env) doctorCmd() *cobra.Command {
	var since time.Duration
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "doctor [--since D] [--json]",
		Short: "summarise what went wrong lately, from the audit log, with advice",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if since <= 0 {
				return usageError{fmt.Errorf("--since %s: want a positive duration", since)}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			rep, err := c.Doctor(since)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(e.stdout, rep)
			}
			writeDoctor(e.stdout, rep, since)
			return nil
		}),
	}
	cmd.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back to look")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}

func writeDoctor(w io.Writer, rep *program.DoctorReport, since time.Duration) {
	w = human.NewWriter(w) // program names, whys and advice quote what programs wrote
	fmt.Fprintf(w, "tend doctor: the last %s (%d events)\n", since, rep.Events)
	if rep.Tracking != "" {
		line := "containment: " + rep.Tracking
		if rep.TrackingWhy != "" {
			line += " (" + rep.TrackingWhy + ")"
		}
		fmt.Fprintln(w, line)
	}
	if len(rep.Programs) == 0 {
		fmt.Fprintln(w, "\nno events in this period")
		writeAdvice(w, rep.Advice, false)
		return
	}
	fmt.Fprintln(w, "\nexits by cause:")
	for _, p := range rep.Programs {
		if len(p.Exits)+len(p.Warnings)+len(p.Wedges) == 0 {
			continue // ran quietly
		}
		fmt.Fprintf(w, "  %-16s %s\n", p.Program, counts(p.Exits))
		if len(p.Warnings) > 0 {
			fmt.Fprintf(w, "  %-16s warnings: %s\n", "", counts(p.Warnings))
		}
		if len(p.Wedges) > 0 {
			fmt.Fprintf(w, "  %-16s wedges: %s\n", "", counts(p.Wedges))
		}
	}
	writeAdvice(w, rep.Advice, true)
}

// writeAdvice writes the advice lines, or (with allClear) that there are none.
func writeAdvice(w io.Writer, advice []string, allClear bool) {
	if len(advice) == 0 {
		if allClear {
			fmt.Fprintln(w, "\nnothing to fix: no crash loops, memory drains, wedges or budget warnings")
		}
		return
	}
	fmt.Fprintln(w, "\nadvice:")
	for _, a := range advice {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}

// counts prints a map as "crash 3, clean_exit 12", largest first.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
