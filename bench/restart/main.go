// Command restart measures tend's restart mechanism in-process, with the
// packages the daemon itself wires together: the reaper (subreaper on), a
// supervisor.Manager, the broker, and an events.Log appending a real audit
// file in a temporary directory. It prints the figures beside their targets
// and the peer supervisors' figures from ../shared/bench-peers/RESULTS.md.
//
//	go run ./bench/restart [-duration 5s] [-kills 200]
//
// It needs no root and leaves no process behind: every program it starts is
// stopped through the Manager, and any child still left is killed and reaped
// before it exits (also on SIGINT or SIGTERM).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the knobs of one benchmark run.
type options struct {
	duration time.Duration // baseline and crash-loop window
	warmup   time.Duration // crash loop runs this long before its window opens
	kills    int           // SIGKILLs in the exit-latency phase
	gap      time.Duration // pause between a replacement's spawn and the next kill
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of the baseline and of the crash-loop window")
	flag.IntVar(&o.kills, "kills", 200, "SIGKILLs in the exit-latency phase")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "crash-loop warm-up before its window")
	flag.DurationVar(&o.gap, "gap", 50*time.Millisecond, "pause between a replacement starting and the next kill")
	flag.Parse()
	if o.duration <= 0 || o.kills <= 0 || o.warmup < 0 || o.gap < 0 {
		fmt.Fprintln(os.Stderr, "restart: -duration and -kills must be positive")
		os.Exit(2)
	}
	// Children lead their own process groups, so a terminal's ^C does not
	// reach them: we must stop them ourselves before exiting.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		stop()
		os.Exit(1)
	}
	printReport(os.Stdout, o, res)
}

// results is everything one run measured.
type results struct {
	baseline baselineResult
	crash    crashResult
	latency  latencyResult
}

// run measures the baseline, then opens the rig (which starts the reaper)
// and runs the crash loop and the exit-latency phase on it. progress gets a
// line per phase.
func run(ctx context.Context, o options, progress io.Writer) (res results, err error) {
	fmt.Fprintf(progress, "baseline: ForkExec+Wait4 of /bin/true for %v\n", o.duration)
	// Before the rig: once the reaper runs it owns wait4 for the whole
	// process, and this loop's Wait4 would race its drain.
	if res.baseline, err = measureBaseline(ctx, o.duration); err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	dir, err := os.MkdirTemp("", "tend-bench-restart-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	r, err := openRig(dir)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.close()) }()

	fmt.Fprintf(progress, "crash loop: /bin/false, zero backoff, %v warm-up + %v window\n", o.warmup, o.duration)
	if res.crash, err = r.crashLoop(ctx, o.warmup, o.duration); err != nil {
		return res, fmt.Errorf("crash loop: %w", err)
	}
	fmt.Fprintf(progress, "exit latency: %d SIGKILLs of sleep 100000, %v apart\n", o.kills, o.gap)
	if res.latency, err = r.exitLatency(ctx, o.kills, o.gap); err != nil {
		return res, fmt.Errorf("exit latency: %w", err)
	}
	return res, nil
}
