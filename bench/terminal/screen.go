package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// ScreenReads times reading the screen of one tty run among Runs: GET
// /v1/screen/{id} through tend's client (a connection per request, as the
// CLI makes), and `tend screen ID` exec'd as a user runs it (in the
// daemon's directory, no flag: it finds the daemon from the tend.toml
// there). A cold read is the first after
// Gap without any, each of an instance not read before; warm reads come
// back to back after one warm-up, cycling over the instances.
type ScreenReads struct {
	Runs    int `json:"runs"`
	History int `json:"history"` // lines of history each read asks for (-history)
	// HistoryLines is how many a read got: at tty_history's default (2,000)
	// between 1,800 and 2,000, as tmux drops the oldest tenth at its limit.
	HistoryLines int          `json:"history_lines,omitempty"`
	Gap          measure.Ms   `json:"cold_gap_ms"`
	Bytes        int          `json:"answer_bytes"` // the body of one GET
	APICold      []measure.Ms `json:"api_cold_ms"`
	APIWarm      []measure.Ms `json:"api_warm_ms"`
	CLICold      []measure.Ms `json:"cli_cold_ms"`
	CLIWarm      []measure.Ms `json:"cli_warm_ms"`
	// tend version exec'd as often as the warm tend screen, interleaved
	// with nothing: the floor of any tend exec, no request made.
	Version []measure.Ms `json:"version_ms"`
}

// screenReads measures d's screens; ids are its running tty instances.
// Cold API and CLI reads alternate, so both see the same daemon.
func screenReads(ctx context.Context, d *daemon, ids []string, o options) (*ScreenReads, error) {
	r := &ScreenReads{Runs: len(ids), Gap: measure.NewMs(o.coldGap), History: o.history}
	next := 0
	id := func() string { next++; return ids[(next-1)%len(ids)] }
	api := func() (time.Duration, error) {
		i := id()
		t := time.Now()
		var b []byte
		var err error
		if o.history > 0 {
			b, err = d.c.ScreenHistoryJSON(i, false, o.history)
		} else {
			b, err = d.c.ScreenJSON(i, false)
		}
		took := time.Since(t)
		if err == nil {
			var scr struct{ Lines, History []string }
			if err = json.Unmarshal(b, &scr); err == nil && !slices.ContainsFunc(scr.Lines, func(l string) bool { return strings.HasPrefix(l, ">") }) {
				err = fmt.Errorf("the screen of %s shows no prompt: %s", i, b)
			} else if err == nil && len(scr.History) < o.history*9/10 {
				err = fmt.Errorf("the screen of %s has %d lines of history, not %d", i, len(scr.History), o.history)
			}
			r.HistoryLines = len(scr.History)
		}
		r.Bytes = len(b)
		return took, err
	}
	cli := func() (time.Duration, error) {
		argv := []string{d.bin, "screen", id()}
		if o.history > 0 {
			argv = append(argv, "--history", strconv.Itoa(o.history))
		}
		return timeExec(argv, userEnv(), d.dir)
	}
	version := func() (time.Duration, error) { return timeExec([]string{d.bin, "version"}, userEnv(), d.dir) }
	for range o.cold {
		for _, read := range []struct {
			f   func() (time.Duration, error)
			out *[]measure.Ms
		}{{api, &r.APICold}, {cli, &r.CLICold}} {
			if err := measure.Sleep(ctx, o.coldGap); err != nil {
				return nil, err
			}
			took, err := read.f()
			if err != nil {
				return nil, err
			}
			*read.out = append(*read.out, measure.NewMs(took))
		}
	}
	for _, read := range []struct {
		f   func() (time.Duration, error)
		n   int
		out *[]measure.Ms
	}{{api, o.requests, &r.APIWarm}, {cli, o.cli, &r.CLIWarm}, {version, o.cli, &r.Version}} {
		for i := range 1 + read.n {
			took, err := read.f()
			if err != nil {
				return nil, err
			}
			if i > 0 {
				*read.out = append(*read.out, measure.NewMs(took))
			}
		}
	}
	return r, nil
}

// timeExec runs argv in dir with env, its output to /dev/null, and
// returns the time from its start to its end.
func timeExec(argv, env []string, dir string) (time.Duration, error) {
	var stderr strings.Builder
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stderr = env, dir, &stderr
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return time.Since(t), nil
}

// userEnv is this process's environment without tend's own variables: a
// tend exec'd in a daemon's directory with it finds the daemon as a user's
// would there, from the nearest tend.toml.
func userEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TEND_") })
}
