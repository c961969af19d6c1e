// Command restart measures tend's restart mechanism in-process, with the
// packages the daemon itself wires together: the state directory, the
// reaper (subreaper on), supervisor.Managers, the broker, the capture of
// output through FIFOs into log files, runs.json, the notify sockets, an
// events.Log appending a real audit file, and (for the cgroup variants) a
// cgroup tree. It writes every sample as JSON to
// bench/restart/results/STAMP/results.json and prints the report derived
// from that file beside the targets; with -peers, beside the figures of a
// bench/peers run read from its own results directory.
//
//	go run ./bench/restart [-duration 5s] [-kills 200] [-default-kills 60] [-peers bench/peers/results/STAMP]
//	go run ./bench/restart -report bench/restart/results/STAMP[,STAMP...] [-peers ...]
//
// It leaves no process behind: every program it starts is stopped through
// its Manager, and any child still left is killed and reaped before it
// exits (also on SIGINT or SIGTERM). The cgroup variants need a writable
// cgroup2 hierarchy (root here); without one they are reported as not
// measured, with the reason.
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
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
	"github.com/tend-sh/tend/internal/spawn"
)

// options are the knobs of one benchmark run.
type options struct {
	duration     time.Duration // baseline and crash-loop window
	warmup       time.Duration // crash loop runs this long before its window opens
	kills        int           // SIGKILLs per variant, zero backoff
	gap          time.Duration // pause before each kill, the instance at rest
	defaultKills int           // SIGKILLs per variant, default config (first crashes; each followed by a second)
	age          time.Duration // a default-config run's age when killed
	ages         repeatAges    // a second run's age when killed: past its backoff, within it
	cgroup       string        // "" find a directory, "off", or a directory in a cgroup2 mount
}

func main() {
	var o options
	var out, peersDir, report string
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of the baseline and of each crash-loop window")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "crash-loop warm-up before its window")
	flag.IntVar(&o.kills, "kills", 200, "SIGKILLs per variant with zero backoff")
	flag.DurationVar(&o.gap, "gap", 50*time.Millisecond, "pause with the instance at rest before each kill")
	flag.IntVar(&o.defaultKills, "default-kills", 40, "programs per variant with the default config, each killed twice (its first crash, then its second)")
	flag.DurationVar(&o.age, "age", 1200*time.Millisecond, "age of a default-config run when killed (more than backoff_initial, 1s)")
	flag.DurationVar(&o.ages.elapsed, "repeat-elapsed-age", 2300*time.Millisecond, "age of a second run killed past its backoff (more than 2x backoff_initial)")
	flag.DurationVar(&o.ages.waiting, "repeat-waiting-age", 1300*time.Millisecond, "age of a second run killed within its backoff (less than 2x backoff_initial less its jitter)")
	flag.StringVar(&o.cgroup, "cgroup", "", `cgroup variants: "" a fresh directory below this process's cgroup2 group, "off", or a directory`)
	flag.StringVar(&out, "out", "", "results directory (default: bench/restart/results of the module)")
	flag.StringVar(&peersDir, "peers", "", "a bench/peers results directory (bench/peers/results/STAMP) of the same session, for the peers' column")
	flag.StringVar(&report, "report", "", "print the report of these results directories (comma-separated) instead of measuring")
	flag.Parse()

	wd, _ := os.Getwd()
	root, rootErr := measure.ModuleRoot(wd)
	var pr *peers.Run
	if peersDir != "" {
		var err error
		if pr, err = peers.Load(peersDir); err != nil {
			fmt.Fprintln(os.Stderr, "restart: -peers:", err)
			os.Exit(2)
		}
	}
	if report != "" {
		var runs []Results
		for _, dir := range strings.Split(report, ",") {
			var r Results
			if err := measure.ReadResults(dir, &r); err != nil {
				fmt.Fprintln(os.Stderr, "restart:", err)
				os.Exit(2)
			}
			runs = append(runs, r)
		}
		// Without -peers, the peers the first run was reported with.
		if pr == nil && runs[0].Peers != "" {
			var err error
			if pr, err = peers.Find(runs[0].Peers, root); err != nil {
				fmt.Fprintf(os.Stderr, "restart: the recorded peers %s: %v (without their columns)\n", runs[0].Peers, err)
			}
		}
		printReport(os.Stdout, runs, pr)
		return
	}
	if o.duration <= 0 || o.kills <= 0 || o.warmup < 0 || o.gap < 0 || o.defaultKills < 0 || o.age <= 0 {
		fmt.Fprintln(os.Stderr, "restart: -duration, -kills and -age must be positive, -default-kills not negative")
		os.Exit(2)
	}
	if out == "" {
		if rootErr != nil {
			fmt.Fprintln(os.Stderr, "restart:", rootErr)
			os.Exit(2)
		}
		out = filepath.Join(root, "bench", "restart", "results")
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
	if pr != nil {
		res.Peers = peers.Rel(pr.Dir, root)
	}
	dir, err := save(out, res, pr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
	b, _ := os.ReadFile(filepath.Join(dir, measure.ReportFile))
	os.Stdout.Write(b)
	fmt.Fprintf(os.Stderr, "results: %s\n", dir)
}

// save writes res and the report derived from it to out/STAMP: the report
// is rendered from the JSON as read back, so that it never shows what the
// file does not hold.
func save(out string, res Results, pr *peers.Run) (string, error) {
	dir := filepath.Join(out, res.Stamp)
	if err := measure.WriteResults(dir, res, nil); err != nil {
		return dir, err
	}
	var back Results
	if err := measure.ReadResults(dir, &back); err != nil {
		return dir, err
	}
	var b strings.Builder
	printReport(&b, []Results{back}, pr)
	return dir, measure.WriteResults(dir, res, []byte(b.String()))
}

// run measures the baseline, then opens the rig (which starts the reaper)
// and runs the crash loops and the exit-latency phases on it. progress
// gets a line per phase.
func run(ctx context.Context, o options, progress io.Writer) (res Results, err error) {
	start := time.Now()
	res = Results{Bench: "restart", Stamp: measure.Stamp(start), Machine: measure.ReadMachine()}
	if wd, err := os.Getwd(); err == nil {
		if root, err := measure.ModuleRoot(wd); err == nil {
			res.Tend = measure.ReadSource(root)
			res.Tend.BuiltFrom = "this binary (go run of the working tree)"
		}
	}
	res.Settings = Settings{
		Duration: measure.NewMs(o.duration), Warmup: measure.NewMs(o.warmup), Kills: o.kills, Gap: measure.NewMs(o.gap),
		DefaultKills: o.defaultKills, Age: measure.NewMs(o.age), CgroupFlag: o.cgroup,
		AgeElapsed: measure.NewMs(o.ages.elapsed), AgeWaiting: measure.NewMs(o.ages.waiting),
		Config:   configZero + ": backoff_initial = backoff_max = \"0s\", max_crashes = 10^9; " + configDefault + ": no key set",
		Programs: "crash loop: /bin/false; latency: sleep 100000",
	}
	// The daemon starts its forker thread first thing, while its descriptor
	// table is small; so does this process.
	spawn.StartForker()

	fmt.Fprintf(progress, "baseline: ForkExec+Wait4 of /bin/true for %v\n", o.duration)
	// Before the rig: once the reaper runs it owns wait4 for the whole
	// process, and this loop's Wait4 would race its drain.
	if res.Baseline, err = measureBaseline(ctx, o.duration); err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	dir, err := os.MkdirTemp("", "tend-bench-restart-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	specs, err := loadSpecs(dir)
	if err != nil {
		return res, err
	}
	d := specs["default"]
	res.Settings.Defaults = fmt.Sprintf("backoff_initial %v, backoff_max %v, backoff_jitter %v, stable_run_reset %v, max_crashes %d",
		d.BackoffInitial, d.BackoffMax, d.BackoffJitter, d.StableRunReset, d.MaxCrashes)
	if o.age <= d.BackoffInitial {
		return res, fmt.Errorf("-age %v is not past backoff_initial (%v): the replacement would wait", o.age, d.BackoffInitial)
	}
	// A second crash waits min(2 x backoff_initial, backoff_max), drawn
	// from [(1 - jitter) x that, that], from the run's start.
	second := min(2*d.BackoffInitial, d.BackoffMax)
	if o.ages.elapsed <= second || float64(o.ages.waiting) >= float64(second)*(1-d.BackoffJitter) {
		return res, fmt.Errorf("-repeat-elapsed-age %v must pass and -repeat-waiting-age %v stay within the second crash's backoff (%v less %.0f%% jitter)",
			o.ages.elapsed, o.ages.waiting, second, 100*d.BackoffJitter)
	}
	cg, why := openCgroups(o.cgroup)
	res.Cgroup.NotMeasured = why
	if cg != nil {
		res.Cgroup.Dir, res.Cgroup.Controllers = cg.dir, cg.tree.Controllers()
		fmt.Fprintf(progress, "cgroup variants in %s\n", cg.dir)
	} else {
		fmt.Fprintf(progress, "no cgroup variants: %s\n", why)
	}
	r, err := openRig(dir)
	if err != nil {
		return res, errors.Join(err, cg.close())
	}
	// The rig first: its Managers remove their groups as they shut down.
	defer func() { err = errors.Join(err, r.close(), cg.close()) }()

	variants := []*cgroups{nil}
	if cg != nil {
		variants = append(variants, cg)
	}
	for _, v := range variants {
		fmt.Fprintf(progress, "crash loop (%s): /bin/false, zero backoff, %v warm-up + %v window\n", tracking(v), o.warmup, o.duration)
		c, err := r.crashLoop(ctx, specs["crashloop"], v, o.warmup, o.duration)
		if err != nil {
			return res, fmt.Errorf("crash loop (%s): %w", tracking(v), err)
		}
		res.Crash = append(res.Crash, c)
	}
	fmt.Fprintf(progress, "exit latency, zero backoff: %d SIGKILLs of sleep 100000 per variant, %v at rest before each\n", o.kills, o.gap)
	lat, err := r.latencyZero(ctx, specs["zero"], cg, o.kills, o.gap)
	res.Latency = append(res.Latency, lat...)
	if err != nil {
		return res, fmt.Errorf("exit latency, zero backoff: %w", err)
	}
	if o.defaultKills > 0 {
		fmt.Fprintf(progress, "exit latency, default config: %d programs per variant, each killed %v old, then its replacement %v or %v old\n",
			o.defaultKills, o.age, o.ages.elapsed, o.ages.waiting)
		lat, err := r.latencyDefault(ctx, specs["default"], cg, o.defaultKills, o.age, o.ages, o.gap)
		res.Latency = append(res.Latency, lat...)
		if err != nil {
			return res, fmt.Errorf("exit latency, default config: %w", err)
		}
	}
	res.Machine.LoadEnd = measure.Loadavg()
	return res, nil
}
