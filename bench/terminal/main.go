// Command terminal measures tend's terminal agents (tty = true) with the
// real daemon, beside Debian's tmux running the same programs in the same
// run (bench/terminal/README.md says what each phase measures, its end
// points, how to run it and how long it takes):
//
//   - echo: keystroke → echo through a real attached client, tend attach
//     over the daemon's unix socket and tmux attach, p50/p90/p99;
//   - flood: a program writing -flood-mb MB of text lines to its terminal
//     as fast as it can, until the screen shows the marker after them,
//     with no client and with one attached, and the servers' CPU per MB;
//   - fleet: N runs of a prompt without and with a terminal (start, PSS,
//     descriptors, idle CPU, tend down, the keeper; what a tty run adds
//     and what its parts cost), and `tend screen` / GET /v1/screen/{id}
//     at N tty runs, cold and warm.
//
// Every sample goes to bench/terminal/results/STAMP/results.json with the
// settings, the machine (its load average) and the commit; report.txt is
// derived from it, and -report derives it again.
//
//	go run ./bench/terminal [-n 1000] [-phases echo,flood,fleet]
//	go run ./bench/terminal -report bench/terminal/results/STAMP
//
// Each daemon runs in its own process group and is stopped with tend down
// (its group SIGKILLed if that fails), the tmux server with kill-server
// (its group SIGKILLed if that fails); this process is a child subreaper,
// and kills and reaps whatever either leaves behind.
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
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Results is one run of the benchmark; a phase not run is absent.
type Results struct {
	Stamp    string          `json:"stamp"`
	Machine  measure.Machine `json:"machine"`
	Source   measure.Source  `json:"source"`
	Phases   []string        `json:"phases,omitempty"`
	Tmux     string          `json:"tmux,omitempty"` // tmux -V
	N        int             `json:"n"`
	Idle     measure.Ms      `json:"idle_window_ms"`
	Settle   measure.Ms      `json:"settle_ms"`
	Echo     *Echo           `json:"echo,omitempty"`
	Flood    *Flood          `json:"flood,omitempty"`
	IOLeft   int             `json:"io_left_behind"`  // processes found after the echo and flood phases (must be 0)
	Plain    *Fleet          `json:"plain,omitempty"` // the runs without a terminal
	TTY      *Fleet          `json:"tty,omitempty"`   // the same runs with tty = true
	Screen   *ScreenReads    `json:"screen,omitempty"`
	InProc   *InProc         `json:"in_process,omitempty"`
	Tracking string          `json:"tracking,omitempty"` // how the daemon tracked the runs (cgroup or group)
}

// options are the settings of a run.
type options struct {
	phases     []string
	n          int           // runs in each fleet
	idle       time.Duration // the idle-CPU window
	settle     time.Duration // between a fleet running and its measures
	keys       int           // echo samples on each side
	keyGap     time.Duration // pause between two keys
	floodBytes int64         // bytes of one flood
	reps       int           // floods on each side, with no client and with one
	floodLimit time.Duration // the longest one flood may take
	cold       int           // cold screen reads of each kind
	coldGap    time.Duration // quiet before each cold read
	requests   int           // warm GET /v1/screen reads
	cli        int           // warm tend screen (and tmux capture-pane) execs
	history    int           // lines of 120 columns each run prints before its prompt, read back with --history
}

var allPhases = []string{"echo", "flood", "fleet"}

func main() {
	var o options
	phases := flag.String("phases", strings.Join(allPhases, ","), "the phases to run, of "+strings.Join(allPhases, ","))
	flag.IntVar(&o.n, "n", 1000, "runs in each fleet")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "window of each idle-CPU measure")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "pause between the fleet running and the measures")
	flag.IntVar(&o.keys, "keys", 500, "keystrokes timed on each side (at most 4000: they must not scroll the screen)")
	flag.DurationVar(&o.keyGap, "key-gap", 5*time.Millisecond, "pause between two keystrokes")
	floodMB := flag.Int64("flood-mb", 50, "MB (10^6 bytes) one flood writes")
	flag.IntVar(&o.reps, "reps", 3, "floods on each side, with no client and with one attached")
	flag.DurationVar(&o.floodLimit, "flood-limit", 5*time.Minute, "the longest one flood may take")
	flag.IntVar(&o.cold, "cold", 5, "cold screen reads of each kind (GET, tend screen)")
	flag.DurationVar(&o.coldGap, "cold-gap", 2*time.Second, "quiet before each cold read")
	flag.IntVar(&o.requests, "requests", 200, "warm GET /v1/screen reads")
	flag.IntVar(&o.cli, "cli", 50, "warm tend screen execs")
	flag.IntVar(&o.history, "history", 0, "lines of 120 columns each fleet run prints before its prompt; the screen reads then ask for that much history (tend screen --history N, ?history=N)")
	out := flag.String("out", "", "results directory (default: bench/terminal/results of the module)")
	report := flag.String("report", "", "print the report of this results directory instead of measuring")
	flag.Parse()
	if *report != "" {
		var r Results
		if err := measure.ReadResults(*report, &r); err != nil {
			fmt.Fprintln(os.Stderr, "terminal:", err)
			os.Exit(2)
		}
		printReport(os.Stdout, r)
		return
	}
	o.phases = strings.Split(*phases, ",")
	o.floodBytes = *floodMB * 1e6
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "terminal:", err)
		os.Exit(2)
	}
	wd, _ := os.Getwd()
	root, err := measure.ModuleRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "terminal:", err)
		os.Exit(2)
	}
	if *out == "" {
		*out = filepath.Join(root, "bench", "terminal", "results")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, root, o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "terminal:", err)
		os.Exit(1)
	}
	dir := filepath.Join(*out, res.Stamp)
	var b strings.Builder
	printReport(&b, res)
	if err := measure.WriteResults(dir, res, []byte(b.String())); err != nil {
		fmt.Fprintln(os.Stderr, "terminal:", err)
		os.Exit(1)
	}
	fmt.Print(b.String())
	fmt.Fprintf(os.Stderr, "results: %s\n", dir)
}

func (o options) check() error {
	for _, p := range o.phases {
		if !slices.Contains(allPhases, p) {
			return fmt.Errorf("-phases: no phase %q (%s)", p, strings.Join(allPhases, ","))
		}
	}
	switch {
	case o.keys < 1 || o.keys > 4000:
		return errors.New("-keys: from 1 to 4000 (more would scroll the echo screen)")
	case o.n < 1 || o.reps < 1 || o.floodBytes < 1 || o.cold < 1 || o.requests < 1 || o.cli < 1:
		return errors.New("-n, -reps, -flood-mb, -cold, -requests and -cli must be at least 1")
	}
	return nil
}

func (o options) has(phase string) bool { return slices.Contains(o.phases, phase) }

// run measures the phases o asks for: the echo and flood phases on one
// daemon and one tmux server, then the two fleets and the in-process heap.
func run(ctx context.Context, root string, o options, progress io.Writer) (Results, error) {
	res := Results{Stamp: measure.Stamp(time.Now()), Machine: measure.ReadMachine(), Source: measure.ReadSource(root),
		Phases: o.phases, N: o.n, Idle: measure.NewMs(o.idle), Settle: measure.NewMs(o.settle)}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return res, err
	}
	work, err := os.MkdirTemp("", "tendterm")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	bin, err := measure.BuildTend(ctx, root, work)
	if err != nil {
		return res, err
	}
	if o.has("echo") || o.has("flood") {
		if err := ioPhases(ctx, bin, work, o, &res, progress); err != nil {
			return res, err
		}
	}
	if o.has("fleet") {
		for _, tty := range []bool{false, true} {
			fmt.Fprintf(progress, "%s fleet of %d...\n", map[bool]string{false: "plain", true: "tty"}[tty], o.n)
			f, reads, tracking, err := fleet(ctx, bin, fleetDir(work, tty), o, tty)
			if err != nil {
				return res, fmt.Errorf("tty = %v fleet: %w", tty, err)
			}
			res.Tracking = tracking
			if tty {
				res.TTY, res.Screen = &f, reads
			} else {
				res.Plain = &f
			}
		}
		fmt.Fprintf(progress, "%d terminals in this process...\n", o.n)
		in, err := inProcess(o.n)
		if err != nil {
			return res, err
		}
		res.InProc = &in
	}
	res.Machine.LoadEnd = measure.Loadavg()
	return res, nil
}

// ioPhases runs the echo and flood phases o asks for on one rig.
func ioPhases(ctx context.Context, bin, work string, o options, res *Results, progress io.Writer) (err error) {
	fmt.Fprintln(progress, "tend and tmux, each with an echo and a flood program...")
	r, err := startIO(ctx, bin, work, o)
	if err != nil {
		return err
	}
	res.Tmux = r.tm.version
	defer func() {
		left, cerr := r.close()
		res.IOLeft = left
		if err == nil {
			err = cerr
		}
	}()
	if o.has("echo") {
		fmt.Fprintf(progress, "keystroke -> echo, %d keys each...\n", o.keys)
		if res.Echo, err = echoPhase(ctx, r, o); err != nil {
			return fmt.Errorf("echo: %w", err)
		}
	}
	if o.has("flood") {
		fmt.Fprintf(progress, "flood of %d MB, %d times each way...\n", o.floodBytes/1e6, o.reps)
		if res.Flood, err = floodPhase(ctx, r, o); err != nil {
			return fmt.Errorf("flood: %w", err)
		}
	}
	return nil
}
