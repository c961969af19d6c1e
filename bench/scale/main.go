// Command scale measures the real tend daemon at scale: it builds the tend
// binary, writes a config in a temporary directory, runs `tend up` as a
// separate process and times what a user of a large fleet would notice:
// the start of N programs, the daemon's memory and idle CPU (without and
// with the memory watchdog), full status listings through the API and
// through `tend ps`, `tend down`, the event fan-out to many SSE
// subscribers, and an sd_notify STATUS= message reaching the status API. It
// prints the figures beside their targets and the peer supervisors' figures
// from ../shared/bench-peers/RESULTS.md.
//
//	go run ./bench/scale [-n 1000] [-idle 10s]
//
// It needs no root. Every daemon runs in its own process group and is
// stopped with tend down, else by SIGKILL of that group; this process is a
// child subreaper, so instances a killed daemon leaves behind become its
// children and are killed and reaped before it exits (also on SIGINT or
// SIGTERM). It never signals a process it did not start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the knobs of one benchmark run.
type options struct {
	n           int           // programs in the fleet
	idle        time.Duration // window of each idle-CPU measure
	settle      time.Duration // pause between the fleet running and the idle window
	requests    int           // timed GET /v1/status listings
	psRuns      int           // timed tend ps runs
	kills       int           // SIGKILLs per fan-out round
	subscribers int           // extra SSE subscribers in the second round
	notifies    int           // STATUS= messages timed
	gap         time.Duration // pause between a replacement running and the next kill
}

// maxRSSDefaults turns the memory watchdog on for every program of the
// second fleet: far above what sleep uses, so it samples and never fires.
const maxRSSDefaults = `max_rss = "1GiB"`

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "programs in the fleet, each `sleep 100000`")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "window of each idle-CPU measure")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "pause between the fleet running and the idle window")
	flag.IntVar(&o.requests, "requests", 50, "timed GET /v1/status listings")
	flag.IntVar(&o.psRuns, "ps", 20, "timed runs of tend ps")
	flag.IntVar(&o.kills, "kills", 100, "SIGKILLs per fan-out round")
	flag.IntVar(&o.subscribers, "subscribers", 100, "extra SSE subscribers in the second fan-out round")
	flag.IntVar(&o.notifies, "notifies", 100, "STATUS= messages timed")
	flag.DurationVar(&o.gap, "gap", 30*time.Millisecond, "pause between a replacement running and the next kill")
	flag.Parse()
	if o.n < 1 || o.idle <= 0 || o.settle < 0 || o.requests < 1 || o.psRuns < 1 || o.kills < 1 || o.subscribers < 0 || o.notifies < 1 || o.gap < 0 {
		fmt.Fprintln(os.Stderr, "scale: -n, -idle, -requests, -ps, -kills and -notifies must be positive")
		os.Exit(2)
	}
	// The daemons lead their own process groups, so a terminal's ^C reaches
	// only this process, which must stop them before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		stop()
		os.Exit(1)
	}
	printReport(os.Stdout, o, res)
}

// results is everything one run measured.
type results struct {
	from    string      // what tend was built from
	fleet   fleetResult // N programs, no watchdog
	watched fleetResult // N programs with max_rss: the memory watchdog samples each every second
	fanout  fanoutResult
	notify  notifyResult
}

// run builds the binaries and runs the three daemons one after the other:
// the fleet, the fleet with the memory watchdog, and the event daemon.
// progress gets a line per phase.
func run(ctx context.Context, o options, progress io.Writer) (res results, err error) {
	if err := becomeSubreaper(); err != nil {
		return res, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	dir, err := os.MkdirTemp("", "tend-bench-scale-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	// Whatever happened, nothing of ours outlives the run.
	defer func() {
		if n := killOrphans(); n > 0 {
			err = errors.Join(err, fmt.Errorf("%d processes left behind (killed)", n))
		}
	}()

	fmt.Fprintf(progress, "building tend and the notifier\n")
	bins, err := build(ctx, dir, progress)
	if err != nil {
		return res, err
	}
	res.from = bins.from
	fmt.Fprintf(progress, "fleet: tend up with %d programs\n", o.n)
	if res.fleet, err = runFleet(ctx, bins, filepath.Join(dir, "fleet"), o, "", true, progress); err != nil {
		return res, fmt.Errorf("fleet: %w", err)
	}
	fmt.Fprintf(progress, "fleet with max_rss: tend up with %d programs, memory watchdog on each\n", o.n)
	if res.watched, err = runFleet(ctx, bins, filepath.Join(dir, "watched"), o, maxRSSDefaults, false, progress); err != nil {
		return res, fmt.Errorf("fleet with max_rss: %w", err)
	}
	fmt.Fprintf(progress, "events: tend up with a kill victim and a notifier\n")
	if res.fanout, res.notify, err = runEvents(ctx, bins, filepath.Join(dir, "events"), o, progress); err != nil {
		return res, err
	}
	return res, nil
}
