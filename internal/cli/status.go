package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

func (e *env) statusCmd() *cobra.Command {
	var jsonOut bool
	var rawLabels []string
	cmd := &cobra.Command{
		Use:   "status [ID|NAME|all] [-l KEY=VALUE]... [--json]",
		Short: "show instances in detail",
		Long: "Show one instance (NAME:K) in detail, or every instance of a program (NAME) or of the\n" +
			"fleet (all); with --json an object for NAME:K and an array otherwise. -l keeps the\n" +
			"instances whose program has the label (without an ID: every one that has it; with\n" +
			"-l the JSON is always an array).",
		Args: cobra.MaximumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			sel, labels, err := selection("status", args, rawLabels)
			if err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			if jsonOut {
				// The daemon's answer is already the object (or array)
				// to print: indent it, do not decode it.
				raw, err := c.SelectJSON(sel, labels)
				if err != nil {
					return err
				}
				return writeIndented(e.stdout, raw)
			}
			list, err := c.Select(e.ctx, sel, labels)
			if err != nil {
				return err
			}
			if _, _, one := program.SplitID(sel); one && len(list) == 1 {
				return writeStatus(e.stdout, &list[0])
			}
			for i := range list {
				if i > 0 {
					fmt.Fprintln(e.stdout)
				}
				if err := writeStatus(e.stdout, &list[i]); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the status object as JSON")
	labelFlag(cmd, &rawLabels)
	return cmd
}

// timeText is a status timestamp in local time, "-" when unset.
func timeText(t program.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeStatus writes one instance as an aligned "key: value" block. Each
// value is escaped (human.Escape): a why, a status text, a label or a
// command line is the program's text, and must not steer the terminal.
func writeStatus(w io.Writer, st *program.Status) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	line := func(key, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", key, human.Escape(fmt.Sprintf(format, args...)))
	}
	line("id", "%s", st.ID)
	line("program", "%s (instance %d)", st.Program, st.Instance)
	line("agent", "%s", yesNo(st.Agent))
	line("state", "%s", st.State)
	line("lifecycle", "%s", st.Lifecycle)
	line("why", "%s", st.Why)
	line("pid", "%s", human.PID(st.PID))
	line("run", "%d", st.Run)
	if st.Alive() {
		line("started", "%s (up %s)", timeText(st.StartedAt), human.Uptime(st))
		line("ready", "%s", yesNo(st.Ready))
	}
	if st.Agent {
		turn := "idle"
		if st.TurnActive {
			turn = "active"
		}
		line("turn", "%s", turn)
	}
	if st.StatusText != "" {
		line("status text", "%s", st.StatusText)
	}
	if len(st.Labels) > 0 {
		line("labels", "%s", program.FormatLabels(st.Labels))
	}
	if st.Protocol != "" {
		line("protocol", "%s", st.Protocol)
		if st.SessionID != "" {
			line("session", "%s", st.SessionID)
		}
		if w := st.Waiting; w != nil {
			opts := make([]string, len(w.Options))
			for i, o := range w.Options {
				opts[i] = fmt.Sprintf("%s (%s: %s)", o.OptionID, o.Kind, o.Name)
			}
			line("waiting", "%s (%s), request %s: %s", w.Title, w.ToolKind, w.RequestID, strings.Join(opts, ", "))
		}
		if st.ProtocolErrors != nil && *st.ProtocolErrors > 0 {
			line("not acp", "%d lines", *st.ProtocolErrors)
		}
	}
	crashes := fmt.Sprint(st.CrashCount)
	if st.Degraded {
		crashes += " (degraded)"
	}
	line("crashes", "%s", crashes)
	line("restarts", "%s", human.Restarts(st.Restarts))
	if le := st.LastExit; le != nil {
		line("last exit", "%s (%s) at %s", human.Exit(le.Code, le.Signal), le.LikelyCause, timeText(le.At))
	}
	if !st.NextStartAt.IsZero() {
		line("next start", "%s", timeText(st.NextStartAt))
	}
	line("rss", "%s", human.RSS(st.RSSBytes))
	line("tracking", "%s", st.Tracking)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Processes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "processes:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  PID\tPPID\tPGID\tSTATE\tRSS\tCMD")
	for _, p := range st.Processes {
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\t%s\t%s\n", p.PID, p.PPID, p.PGID, human.Escape(p.State), human.RSS(p.RSSBytes), human.Escape(strings.TrimSpace(p.Cmd)))
	}
	return tw.Flush()
}
