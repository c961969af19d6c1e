// Command churn measures sessions (agents started on demand) on the real
// daemon, in phases:
//
//   - soak: programs added and removed with remove_on_exit, -batch at a
//     time (each runs /bin/true and is removed once it ends), until -total
//     or -duration, sampling the daemon's RSS, live heap, descriptors,
//     goroutines and audit size every -every: each should stay flat after
//     warm-up. The raw series go to soak.json, and a plot to soak.png (and
//     soak.svg);
//
//   - add: POST /v1/programs to its answer, and to the run's spawned event
//     (the daemon's own time stamp): add → running, daemon side;
//
//   - run: `tend run --rm -a -- /bin/true` exec'd end to end, beside the
//     floor, a Go program that forks and waits /bin/true (bench/churn/floor),
//     exec'd in turn in the same run;
//
//   - ps: `tend ps` and `tend ps -l session=s7` exec'd in turn at -n
//     programs (a config of -n programs in -n/10 sessions), then -transient
//     remove_on_exit programs added over the API, and the series of
//     /metrics by ?instances= mode there.
//
//     go run ./bench/churn [-phases soak,add,run,ps] [-duration 5m] [-total 100000] [-batch 100]
//     [-every 10s] [-runs 50] [-n 10000] [-transient 1000] [-cli 20] [-out DIR]
//
// Raw results go to bench/churn/results/STAMP/ (results.json, report.txt,
// soak.json, soak.svg, soak.png). The hour-long soak is -duration 1h
// -total 100000; the five-minute check is the default. It runs the
// daemons as separate processes in their own process groups and, as a
// child subreaper, kills and reaps whatever a daemon leaves behind.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

type options struct {
	phases    []string
	duration  time.Duration
	total     int
	batch     int
	spread    bool // the soak paces its batches over the duration
	every     time.Duration
	runs      int
	n         int
	transient int
	cli       int
}

// Results is everything a run measured, as results.json holds it.
type Results struct {
	Settings map[string]string `json:"settings"`
	Machine  measure.Machine   `json:"machine"`
	Source   measure.Source    `json:"source"`
	Started  time.Time         `json:"started"`
	Soak     *Soak             `json:"soak,omitempty"`
	Add      *Add              `json:"add,omitempty"`
	Run      *Run              `json:"run,omitempty"`
	PS       *PS               `json:"ps,omitempty"`
	Errors   []string          `json:"errors,omitempty"`
}

func main() {
	var o options
	var phases, out string
	flag.StringVar(&phases, "phases", "soak,add,run,ps", "phases to run, comma-separated: soak, add, run, ps")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "the soak's length at most")
	flag.IntVar(&o.total, "total", 100000, "programs the soak adds and removes at most")
	flag.IntVar(&o.batch, "batch", 100, "programs added at once in the soak")
	flag.BoolVar(&o.spread, "spread", false, "spread the soak's -total programs evenly over -duration (else as fast as they go)")
	flag.DurationVar(&o.every, "every", 10*time.Second, "how often the soak samples the daemon")
	flag.IntVar(&o.runs, "runs", 50, "timed adds, and timed tend run / floor pairs")
	flag.IntVar(&o.n, "n", 10000, "programs of the ps phase")
	flag.IntVar(&o.transient, "transient", 1000, "remove_on_exit programs added in the ps phase before /metrics is counted")
	flag.IntVar(&o.cli, "cli", 20, "timed tend ps and tend ps -l execs each")
	flag.StringVar(&out, "out", "", "results directory (default: bench/churn/results of the module)")
	flag.Parse()
	o.phases = strings.Split(phases, ",")
	for _, p := range o.phases {
		if !slices.Contains([]string{"soak", "add", "run", "ps"}, p) {
			fmt.Fprintf(os.Stderr, "churn: unknown phase %q\n", p)
			os.Exit(2)
		}
	}
	wd, _ := os.Getwd()
	root, err := measure.ModuleRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(2)
	}
	if out == "" {
		out = filepath.Join(root, "bench", "churn", "results")
	}
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "churn: cannot become a subreaper:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o, root, os.Stderr)
	killOrphans()
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		fmt.Fprintln(os.Stderr, "churn:", err)
	}
	dir := filepath.Join(out, measure.Stamp(res.Started))
	if err := save(dir, res); err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "churn: results in %s\n", dir)
	os.Stdout.Write(report(res))
	if len(res.Errors) > 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, root string, progress io.Writer) (res Results, err error) {
	res = Results{Started: time.Now().UTC(), Machine: measure.ReadMachine(),
		Settings: map[string]string{"phases": strings.Join(o.phases, ","), "duration": o.duration.String(),
			"total": fmt.Sprint(o.total), "batch": fmt.Sprint(o.batch), "spread": fmt.Sprint(o.spread), "every": o.every.String(), "runs": fmt.Sprint(o.runs),
			"n": fmt.Sprint(o.n), "transient": fmt.Sprint(o.transient), "cli": fmt.Sprint(o.cli)}}
	defer func() { res.Machine.LoadEnd = measure.Loadavg() }()
	work, err := os.MkdirTemp("", "churn")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	b, err := build(ctx, root, work)
	res.Source = b.src
	if err != nil {
		return res, err
	}
	var errs []error
	for _, p := range o.phases {
		fmt.Fprintf(progress, "churn: %s\n", p)
		dir := filepath.Join(work, p)
		var err error
		switch p {
		case "soak":
			res.Soak, err = soak(ctx, o, b.tend, dir, progress)
		case "add":
			res.Add, err = addPhase(ctx, o, b.tend, dir)
		case "run":
			res.Run, err = runPhase(ctx, o, b, dir)
		case "ps":
			res.PS, err = psPhase(ctx, o, b.tend, dir, progress)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return res, errors.Join(errs...)
}

// save writes results.json, report.txt and, with a soak, its series and plot.
func save(dir string, res Results) error {
	if err := measure.WriteResults(dir, res, report(res)); err != nil {
		return err
	}
	if res.Soak == nil || len(res.Soak.Samples) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(res.Soak.Samples, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return plot(dir, res.Soak)
}
