package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
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
			"terminal (tty = true) is shown as text, without its control sequences; --raw\n" +
			"prints the bytes it wrote.",
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
			return c.Logs(e.ctx, sel, o, e.stdout)
		}),
	}
	labelFlag(cmd, &rawLabels)
	f := cmd.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new output")
	f.IntVarP(&o.Tail, "lines", "n", 100, "how many of the last lines to print")
	f.StringVar(&o.Since, "since", "", "only lines newer than this: a duration (10m) or an RFC 3339 time")
	f.BoolVarP(&o.Timestamps, "timestamps", "t", false, "print each line's time")
	f.BoolVar(&o.Stderr, "stderr", false, "only stderr lines")
	f.BoolVar(&o.Raw, "raw", false, "a terminal's output as the bytes the program wrote, control sequences and all; a protocol agent's JSON-RPC lines in place of its transcript")
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
