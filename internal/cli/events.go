package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

func (e *env) eventsCmd() *cobra.Command {
	var (
		follow, jsonOut bool
		since           uint64
		kinds           string
		id              string
		rawLabels       []string
	)
	cmd := &cobra.Command{
		Use:   "events [-f] [--since SEQ] [--json] [--kinds K1,K2] [--id ID] [-l KEY=VALUE]...",
		Short: "print the daemon's numbered events",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			labels, err := parseLabels(rawLabels)
			if err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			var kindList []string
			for k := range strings.SplitSeq(kinds, ",") {
				if k = strings.TrimSpace(k); k != "" {
					kindList = append(kindList, k)
				}
			}
			if follow {
				err := c.FollowMatching(e.ctx, since, client.EventFilter{Kinds: kindList, ID: id, Labels: labels}, func(ev program.Event) error {
					return e.printEvent(ev, jsonOut)
				})
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			list, err := c.EventsMatching(since, client.EventFilter{Kinds: kindList, ID: id, Labels: labels})
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(e.stdout, nonNil(list))
			}
			for _, ev := range list {
				fmt.Fprintln(e.stdout, FormatEvent(ev))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing events as they happen")
	f.BoolVar(&jsonOut, "json", false, "print JSON: an array, or with -f one object a line")
	f.Uint64Var(&since, "since", 0, "print the events after this seq")
	f.StringVar(&kinds, "kinds", "", "only these kinds, comma-separated")
	f.StringVar(&id, "id", "", "only events of this id (all, NAME or NAME:K)")
	labelFlag(cmd, &rawLabels)
	return cmd
}

// printEvent writes one followed event as a text line or a JSON line.
func (e *env) printEvent(ev program.Event, jsonOut bool) error {
	if !jsonOut {
		_, err := fmt.Fprintln(e.stdout, FormatEvent(ev))
		return err
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", human.EscapeJSON(b))
	return err
}
