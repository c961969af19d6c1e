// Command scale measures the real tend daemon at scale: it builds the tend
// binary, writes configs in a temporary directory, runs `tend up` as a
// separate process and times what a user of a large fleet would notice:
// the start of N instances (with no spawn_failed), the daemon's memory,
// descriptors and idle CPU, full status listings through the API, one
// `tend ps` and one `tend status ID` exec, `tend down`; at one size, the
// idle CPU with the memory watchdog on every instance (with cgroups and
// without, and the reads of the groups' memory files) and of idle agents;
// the loading of large configs; the event fan-out to many SSE subscribers,
// and an sd_notify STATUS= message reaching the status API. Listings are
// timed cold (each the first request after 2 s without one) beside warm, the
// daemon's memory at its peak over the fleet's life beside at rest, each
// plain fleet size beside a Go loop starting as many sleeps (the floor) and
// at 1,000 and 10,000 beside the same fleet with cgroups off.
//
// Every sample goes to bench/scale/results/STAMP/results.json with the
// settings, the machine and the commit; the report is derived from that
// file (and, with -peers, from a bench/peers run of the same session).
//
//	go run ./bench/scale [-n 100,1000,10000] [-peers bench/peers/results/STAMP]
//	go run ./bench/scale -report bench/scale/results/STAMP[,STAMP...] [-peers ...]
//
// Every daemon runs in its own process group and is stopped with tend
// down, else by SIGKILL of that group; this process is a child subreaper,
// so instances a killed daemon leaves behind become its children and are
// killed and reaped before it exits (also on SIGINT or SIGTERM). It never
// signals a process it did not start, and removes the (empty) cgroups of
// the daemons it started.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
)

// options are the knobs of one benchmark run.
type options struct {
	ns          []int         // instances of each plain fleet
	offNs       []int         // sizes run again with cgroup = "off" (tend's other mode), beside
	instances   int           // per program in the plain fleets
	watched     int           // instances of the max_rss fleets; 0 = none
	agents      int           // instances of the agents fleet; 0 = none
	cgroup      string        // [daemon] cgroup of the plain fleets ("" = default)
	idle        time.Duration // window of each idle-CPU measure
	settle      time.Duration // pause between the fleet running and the idle window
	requests    int           // timed GET /v1/status listings
	cliRuns     int           // timed tend ps and tend status runs, each
	cold        int           // cold GET /v1/status and tend ps, each
	coldGap     time.Duration // quiet before a cold request
	loadRuns    int           // timed config loads per shape
	sweeps      int           // timed sweeps of the groups' memory files
	kills       int           // SIGKILLs per fan-out round; 0 = no event daemon
	subscribers int           // extra SSE subscribers in the second round
	notifies    int           // STATUS= messages timed
	gap         time.Duration // pause between a replacement running and the next kill
	upTimeout   time.Duration // the longest wait for a fleet to run
	stall       time.Duration // a start that gains no instance this long has stopped
}

// Fleet settings of the other daemons.
const (
	// maxRSSDefaults turns the memory watchdog on for every program of the
	// watched fleets: far above what sleep uses, so it samples and never fires.
	maxRSSDefaults = `max_rss = "1GiB"`
	// agentDefaults makes every program an agent (turns reported); sleep
	// prints nothing and sends no turn message: idle agents.
	agentDefaults = `agent = true`
)

func main() {
	var o options
	var ns, offNs, out, peersDir, report string
	flag.StringVar(&ns, "n", "100,1000,10000", "instances of each plain fleet, comma-separated")
	flag.StringVar(&offNs, "off-n", "1000,10000", `sizes of plain fleets run again with cgroup = "off", beside the default mode; "" for none`)
	flag.IntVar(&o.instances, "instances", 1, "instances per program in the plain fleets (n/instances programs)")
	flag.IntVar(&o.watched, "watched", 1000, "instances of the max_rss fleets (with cgroups and without); 0 = none")
	flag.IntVar(&o.agents, "agents", 1000, "instances of the idle-agents fleet; 0 = none")
	flag.StringVar(&o.cgroup, "cgroup", "", `[daemon] cgroup of the plain fleets: "" its default (auto), "off", or a directory`)
	flag.DurationVar(&o.idle, "idle", 150*time.Second, "window of each idle-CPU measure (>= 150s sees Go's forced collection, every 2 min, and the event prune)")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "pause between the fleet running and the idle window (bench/peers settles 5s)")
	flag.IntVar(&o.requests, "requests", 50, "timed GET /v1/status listings per plain fleet")
	flag.IntVar(&o.cliRuns, "cli", 20, "timed execs of tend ps and of tend status ID (and of a Go hello world) per plain fleet")
	flag.IntVar(&o.cold, "cold", 5, "cold GET /v1/status and tend ps per plain fleet, each the first request after -cold-gap")
	flag.DurationVar(&o.coldGap, "cold-gap", 2*time.Second, "quiet before each cold request (a listing answers from samples taken after the last one, up to 10s old)")
	flag.IntVar(&o.loadRuns, "loads", 5, "timed config loads per shape")
	flag.IntVar(&o.sweeps, "sweeps", 20, "timed sweeps of the groups' memory files")
	flag.IntVar(&o.kills, "kills", 100, "SIGKILLs per fan-out round; 0 = no event daemon")
	flag.IntVar(&o.subscribers, "subscribers", 100, "extra SSE subscribers in the second fan-out round")
	flag.IntVar(&o.notifies, "notifies", 100, "STATUS= messages timed")
	flag.DurationVar(&o.gap, "gap", 30*time.Millisecond, "pause between a replacement running and the next kill")
	flag.DurationVar(&o.upTimeout, "up-timeout", 10*time.Minute, "the longest wait for a fleet to run")
	flag.DurationVar(&o.stall, "stall", 30*time.Second, "a start that gains no running instance this long has stopped")
	flag.StringVar(&out, "out", "", "results directory (default: bench/scale/results of the module)")
	flag.StringVar(&peersDir, "peers", "", "a bench/peers results directory (bench/peers/results/STAMP) of the same session, for the peers' columns")
	flag.StringVar(&report, "report", "", "print the report of these results directories (comma-separated) instead of measuring")
	flag.Parse()

	wd, _ := os.Getwd()
	root, rootErr := measure.ModuleRoot(wd)
	var pr *peers.Run
	if peersDir != "" {
		var err error
		if pr, err = peers.Load(peersDir); err != nil {
			fmt.Fprintln(os.Stderr, "scale: -peers:", err)
			os.Exit(2)
		}
	}
	if report != "" {
		var runs []Results
		for _, dir := range strings.Split(report, ",") {
			var r Results
			if err := measure.ReadResults(dir, &r); err != nil {
				fmt.Fprintln(os.Stderr, "scale:", err)
				os.Exit(2)
			}
			runs = append(runs, r)
		}
		// Without -peers, the peers the first run was reported with.
		if pr == nil && runs[0].Peers != "" {
			var err error
			if pr, err = peers.Find(runs[0].Peers, root); err != nil {
				fmt.Fprintf(os.Stderr, "scale: the recorded peers %s: %v (without their columns)\n", runs[0].Peers, err)
			}
		}
		printReport(os.Stdout, runs, pr)
		return
	}
	var err error
	if o.ns, err = sizes(ns); err != nil {
		fmt.Fprintln(os.Stderr, "scale: -n:", err)
		os.Exit(2)
	}
	if o.offNs, err = sizes(offNs); err != nil {
		fmt.Fprintln(os.Stderr, "scale: -off-n:", err)
		os.Exit(2)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if out == "" {
		if rootErr != nil {
			fmt.Fprintln(os.Stderr, "scale:", rootErr)
			os.Exit(2)
		}
		out = filepath.Join(root, "bench", "scale", "results")
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
	if pr != nil {
		res.Peers = peers.Rel(pr.Dir, root)
	}
	dir, err := save(out, res, pr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	b, _ := os.ReadFile(filepath.Join(dir, measure.ReportFile))
	os.Stdout.Write(b)
	fmt.Fprintf(os.Stderr, "results: %s\n", dir)
}

// sizes parses a comma-separated list of positive numbers ("" is none).
func sizes(list string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (o options) check() error {
	for _, n := range append(slices.Clone(o.ns), o.offNs...) {
		if o.instances < 1 || n%o.instances != 0 {
			return fmt.Errorf("-n %d is not a multiple of -instances %d", n, o.instances)
		}
	}
	if o.cgroup == "off" && len(o.offNs) > 0 {
		return errors.New(`-cgroup off leaves no other mode for -off-n (set -off-n "")`)
	}
	if len(o.ns) == 0 || o.idle <= 0 || o.settle < 0 || o.requests < 1 || o.cliRuns < 1 || o.cold < 1 || o.coldGap < 0 || o.loadRuns < 1 || o.sweeps < 1 ||
		o.kills < 0 || o.subscribers < 0 || o.notifies < 1 || o.gap < 0 || o.watched < 0 || o.agents < 0 || o.upTimeout <= 0 || o.stall <= 0 {
		return errors.New("-n, -idle, -requests, -cli, -cold, -loads, -sweeps, -notifies, -up-timeout and -stall must be positive; -watched, -agents, -kills, -cold-gap not negative")
	}
	return nil
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

// run builds the binaries, times the config loads, then runs the daemons
// one after the other: the plain fleets, the max_rss fleets, the agents
// and the event daemon. progress gets a line per phase.
func run(ctx context.Context, o options, progress io.Writer) (res Results, err error) {
	start := time.Now()
	res = Results{Bench: "scale", Stamp: measure.Stamp(start), Machine: measure.ReadMachine()}
	res.Settings = Settings{
		Ns: o.ns, OffNs: o.offNs, Instances: o.instances, Watched: o.watched, Agents: o.agents, Cgroup: o.cgroup,
		Idle: measure.NewMs(o.idle), Settle: measure.NewMs(o.settle), Requests: o.requests, CLIRuns: o.cliRuns,
		Cold: o.cold, ColdGap: measure.NewMs(o.coldGap), MemEvery: measure.NewMs(memEvery),
		LoadRuns: o.loadRuns, Sweeps: o.sweeps, Kills: o.kills, Subscribers: o.subscribers, Notifies: o.notifies,
		Gap: measure.NewMs(o.gap), UpTimeout: measure.NewMs(o.upTimeout), Stall: measure.NewMs(o.stall),
		Program: "sleep 100000",
	}
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

	fmt.Fprintf(progress, "building tend, the notifier and hello\n")
	bins, err := build(ctx, dir, progress)
	if err != nil {
		return res, err
	}
	res.Tend = bins.src

	for _, shape := range configShapes(o.ns, o.instances) {
		fmt.Fprintf(progress, "config load: %d programs x %d instances, %d times\n", shape[0], shape[1], o.loadRuns)
		cl, err := measureConfigLoad(dir, shape[0], shape[1], o.loadRuns)
		if err != nil {
			return res, fmt.Errorf("config load: %w", err)
		}
		res.ConfigLoad = append(res.ConfigLoad, cl)
	}

	var fleets []fleetSpec
	for _, n := range o.ns {
		fleets = append(fleets, fleetSpec{label: labelPlain, programs: n / o.instances, instances: o.instances, cgroup: o.cgroup, listings: true, floor: true})
	}
	for _, n := range o.offNs {
		fleets = append(fleets, fleetSpec{label: labelPlainOff, programs: n / o.instances, instances: o.instances, cgroup: "off", listings: true})
	}
	if o.watched > 0 {
		fleets = append(fleets,
			fleetSpec{label: "max_rss", programs: o.watched, instances: 1, defaults: maxRSSDefaults, reads: true},
			fleetSpec{label: "max_rss, cgroup off", programs: o.watched, instances: 1, defaults: maxRSSDefaults, cgroup: "off"})
	}
	if o.agents > 0 {
		fleets = append(fleets, fleetSpec{label: "agents", programs: o.agents, instances: 1, defaults: agentDefaults})
	}
	for i, fs := range fleets {
		fmt.Fprintf(progress, "fleet %q: tend up with %d programs x %d instances\n", fs.label, fs.programs, fs.instances)
		f, reads, err := runFleet(ctx, bins, filepath.Join(dir, "fleet"+strconv.Itoa(i)), o, fs, progress)
		res.Fleets = append(res.Fleets, f)
		if reads != nil {
			res.MemoryReads = reads
		}
		if err != nil {
			return res, fmt.Errorf("fleet %q of %d: %w", fs.label, fs.n(), err)
		}
	}
	if o.kills > 0 {
		fmt.Fprintf(progress, "events: tend up with a kill victim and a notifier\n")
		if res.Events, err = runEvents(ctx, bins, filepath.Join(dir, "events"), o, progress); err != nil {
			return res, err
		}
	}
	res.Machine.LoadEnd = measure.Loadavg()
	return res, nil
}

// Labels of the plain fleets: tend's default mode (cgroups as -cgroup
// says, "auto" by default), and the other mode beside it.
const (
	labelPlain    = "plain"
	labelPlainOff = "plain, cgroup off"
)

// plain returns the plain fleets of r labelled label, smallest first.
func plain(r Results, label string) []Fleet {
	var fs []Fleet
	for _, f := range r.Fleets {
		if f.Label == label {
			fs = append(fs, f)
		}
	}
	slices.SortStableFunc(fs, func(a, b Fleet) int { return a.N - b.N })
	return fs
}
