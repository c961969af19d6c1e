package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
)

func (e *env) logsCmd() *cobra.Command {
	var o client.LogOptions
	var rawLabels []string
	cmd := &cobra.Command{
		Use:   "logs [ID|NAME|all] [-l KEY=VALUE]... [-f] [-n N] [--since D] [--timestamps] [--stderr] [--raw]",
		Short: "print captured output: one instance, every instance of a program, or all",
		Long: "Prints the instances' captured stdout and stderr. With more than one instance the\n" +
			"lines are merged in time order and each is prefixed NAME:K | (as docker compose\n" +
			"logs does); -n counts lines over all of them together. -l keeps the instances whose\n" +
			"program has the label (without an ID: every one that has it). A program with a\n" +
			"terminal (tty = true) is shown as text, without its control sequences. To a terminal,\n" +
			"control characters and sequences other than colours are escaped (\\x1b); --raw prints\n" +
			"the bytes the program wrote.",
		Args: cobra.MaximumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			sel, labels, err := selection("logs", args, rawLabels)
			if err != nil {
				return err
			}
			o.Labels = labels
			if o.Tail < 0 {
				return usageError{errors.New("logs: -n wants a number of lines from 0")}
			}
			if o.Since != "" {
				if err := checkSince(o.Since); err != nil {
					return usageError{err}
				}
				if !cmd.Flags().Changed("lines") {
					o.Tail = -1 // every line since then
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			// To a terminal the output is escaped but for its colours, so
			// what a program wrote cannot steer the operator's terminal;
			// to a file or a pipe, and with --raw, it is as written, as
			// docker logs prints it (docs/trust.md).
			// JSON lines keep the text, with C1 and bidi controls as \u
			// escapes (human.EscapeJSON).
			w := &escapedLines{w: e.stdout, escape: human.EscapeColour}
			switch {
			case o.JSON:
				w.escape = func(s string) string { return string(human.EscapeJSON([]byte(s))) }
			case o.Raw || !isTerminal(e.stdout):
				return c.Logs(e.ctx, sel, o, e.stdout)
			}
			err = c.Logs(e.ctx, sel, o, w)
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		}),
	}
	labelFlag(cmd, &rawLabels)
	f := cmd.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new output")
	f.IntVarP(&o.Tail, "lines", "n", 100, "how many of the last lines to print")
	f.StringVar(&o.Since, "since", "", "only lines newer than this: a duration (10m) or an RFC 3339 time")
	f.BoolVarP(&o.Timestamps, "timestamps", "t", false, "print each line's time")
	f.BoolVar(&o.Stderr, "stderr", false, "only stderr lines")
	f.BoolVar(&o.Raw, "raw", false, "the bytes the program wrote, control sequences and all, even to a terminal; a protocol agent's JSON-RPC lines in place of its transcript")
	f.BoolVar(&o.JSON, "json", false, `JSON lines {"ts","id","stream","line"}`)
	return cmd
}

// checkSince refuses a --since that is neither a duration nor a time.
func checkSince(v string) error {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return nil
	}
	if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return nil
	}
	return fmt.Errorf("logs: --since %q: want a duration such as 10m or an RFC 3339 time", v)
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// escapedLines writes whole lines to w through escape: a sequence or a
// character cut between two reads is seen whole. A line longer than
// maxEscapedLine is written in pieces (a sequence cut there is escaped,
// never passed).
type escapedLines struct {
	w      io.Writer
	escape func(string) string
	buf    []byte
}

const maxEscapedLine = 64 << 10

func (l *escapedLines) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	end := bytes.LastIndexByte(l.buf, '\n') + 1
	if end == 0 && len(l.buf) >= maxEscapedLine {
		end = len(l.buf)
	}
	if end > 0 {
		if _, err := io.WriteString(l.w, l.escape(string(l.buf[:end]))); err != nil {
			return 0, err
		}
		l.buf = append(l.buf[:0], l.buf[end:]...)
	}
	return len(p), nil
}

// Flush writes what is left of an unfinished last line.
func (l *escapedLines) Flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := io.WriteString(l.w, l.escape(string(l.buf)))
	l.buf = l.buf[:0]
	return err
}
