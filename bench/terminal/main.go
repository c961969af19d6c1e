// Command terminal measures what tty = true costs the real daemon at N
// runs (docs/terminal.md): it builds tend, starts N runs of a program that
// prints a prompt and waits (sh -c 'printf "> "; exec sleep 100000') once
// without a terminal and once with one, and reads for each fleet the time
// until every run runs, the daemon's PSS, RSS, threads and descriptors,
// its idle CPU over a window, and with terminals the keeper's; then, in
// this process, the heap of N screens and of N whole terminals (a pty, the
// screen, the epoll watch) with the same prompt drawn. The difference of
// the two fleets, per run, is what a terminal adds; the heap figures say
// how much of it is the screen.
//
// Every sample goes to bench/terminal/results/STAMP/results.json with the
// settings, the machine and the commit; report.txt is derived from it.
//
//	go run ./bench/terminal [-n 1000] [-idle 10s]
//	go run ./bench/terminal -report bench/terminal/results/STAMP
//
// Each daemon runs in its own process group and is stopped with tend down
// (its group SIGKILLed if that fails); this process is a child subreaper,
// and kills and reaps whatever a daemon leaves behind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
)

// Results is one run of the benchmark.
type Results struct {
	Stamp    string          `json:"stamp"`
	Machine  measure.Machine `json:"machine"`
	Source   measure.Source  `json:"source"`
	N        int             `json:"n"`
	Idle     measure.Ms      `json:"idle_window_ms"`
	Settle   measure.Ms      `json:"settle_ms"`
	Plain    Fleet           `json:"plain"` // the runs without a terminal
	TTY      Fleet           `json:"tty"`   // the same runs with tty = true
	InProc   InProc          `json:"in_process"`
	Tracking string          `json:"tracking"` // how the daemon tracked the runs (cgroup or group)
}

// Fleet is one daemon's figures with N runs.
type Fleet struct {
	Start      measure.Ms `json:"start_ms"`      // tend up exec'd until every run runs
	Daemon     Memory     `json:"daemon"`        // after the fleet settled
	DaemonIdle measure.Ms `json:"daemon_cpu_ms"` // CPU over the idle window
	Keeper     *Memory    `json:"keeper,omitempty"`
	KeeperIdle measure.Ms `json:"keeper_cpu_ms,omitempty"`
	Down       measure.Ms `json:"down_ms"`     // tend down until the daemon exited
	Left       int        `json:"left_behind"` // processes found after tend down (must be 0)
}

// InProc is the heap of terminals made in this process.
type InProc struct {
	ScreenHeap   int64 `json:"screen_heap_bytes"`   // per 120x40 screen with the prompt drawn
	TerminalHeap int64 `json:"terminal_heap_bytes"` // per terminal (pty, screen, epoll watch), the prompt drawn
	Goroutines   int   `json:"terminal_goroutines"` // added by N terminals
}

const prompt = `printf '> '; exec sleep 100000`

func main() {
	n := flag.Int("n", 1000, "runs in each fleet")
	idle := flag.Duration("idle", 10*time.Second, "window of each idle-CPU measure")
	settle := flag.Duration("settle", 5*time.Second, "pause between the fleet running and the measures")
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
	res, err := run(ctx, root, *n, *idle, *settle, os.Stderr)
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

// run measures both fleets and the in-process heap.
func run(ctx context.Context, root string, n int, idle, settle time.Duration, progress io.Writer) (Results, error) {
	res := Results{Stamp: measure.Stamp(time.Now()), Machine: measure.ReadMachine(), Source: measure.ReadSource(root),
		N: n, Idle: measure.NewMs(idle), Settle: measure.NewMs(settle)}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return res, err
	}
	work, err := os.MkdirTemp("", "tendterm")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "tend")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tend")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return res, fmt.Errorf("go build: %v\n%s", err, b)
	}
	for _, tty := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tty"}[tty]
		fmt.Fprintf(progress, "%s fleet of %d...\n", name, n)
		f, tracking, err := fleet(ctx, bin, filepath.Join(work, name), n, tty, idle, settle)
		if err != nil {
			return res, fmt.Errorf("%s fleet: %w", name, err)
		}
		res.Tracking = tracking
		if tty {
			res.TTY = f
		} else {
			res.Plain = f
		}
	}
	fmt.Fprintf(progress, "%d terminals in this process...\n", n)
	res.InProc, err = inProcess(n)
	res.Machine.LoadEnd = measure.Loadavg()
	return res, err
}

// fleet starts a daemon with n runs of the prompt, with or without tty, and
// measures it.
func fleet(ctx context.Context, bin, dir string, n int, tty bool, idle, settle time.Duration) (Fleet, string, error) {
	var f Fleet
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, "", err
	}
	conf := filepath.Join(dir, "tend.toml")
	cfg := fmt.Sprintf("[program.p]\nshell = %q\ninstances = %d\ntty = %v\nstop_grace = \"2s\"\n", prompt, n, tty)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return f, "", err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return f, "", err
	}
	defer log.Close()
	up := exec.Command(bin, "up", "-c", conf)
	up.Stdout, up.Stderr = log, log
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := up.Start(); err != nil {
		return f, "", err
	}
	exited := make(chan struct{})
	go func() { up.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		killOrphans()
	}()
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	tracking := ""
	for {
		sts, err := c.List(false)
		running := 0
		for _, st := range sts {
			if st.State == program.StateRunning {
				running++
				tracking = st.Tracking
			}
		}
		if err == nil && running == n {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return f, "", fmt.Errorf("%d of %d running after 5 minutes", running, n)
		}
		if err := measure.Sleep(ctx, 20*time.Millisecond); err != nil {
			return f, "", err
		}
	}
	f.Start = measure.NewMs(time.Since(t0))
	if err := measure.Sleep(ctx, settle); err != nil {
		return f, "", err
	}
	daemon := up.Process.Pid
	keeper := 0
	if tty {
		if keeper = keeperOf(filepath.Join(dir, ".tend")); keeper == 0 {
			return f, "", errors.New("no keeper")
		}
	}
	d0, k0 := cpuTime(daemon), cpuTime(keeper)
	if err := measure.Sleep(ctx, idle); err != nil {
		return f, "", err
	}
	f.DaemonIdle = measure.NewMs(cpuTime(daemon) - d0)
	if f.Daemon, err = readMemory(daemon); err != nil {
		return f, "", err
	}
	if keeper != 0 {
		f.KeeperIdle = measure.NewMs(cpuTime(keeper) - k0)
		m, err := readMemory(keeper)
		if err != nil {
			return f, "", err
		}
		f.Keeper = &m
	}
	t1 := time.Now()
	if err := exec.Command(bin, "down", "-c", conf).Run(); err != nil {
		return f, "", fmt.Errorf("tend down: %w", err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		return f, "", errors.New("the daemon did not exit after tend down")
	}
	f.Down = measure.NewMs(time.Since(t1))
	time.Sleep(200 * time.Millisecond)
	f.Left = killOrphans()
	if keeper != 0 && syscall.Kill(keeper, 0) == nil {
		f.Left++
	}
	return f, tracking, nil
}

// killOrphans SIGKILLs and reaps every child of this process (instances or
// a keeper a daemon left, which this subreaper adopted) and says how many.
func killOrphans() int {
	kids := measure.Children()
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
	return len(kids)
}

// inProcess measures the heap of n screens, then of n terminals, each with
// the prompt drawn.
func inProcess(n int) (InProc, error) {
	var r InProc
	heap := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	h0 := heap()
	screens := make([]*terminal.Screen, n)
	for i := range screens {
		screens[i] = terminal.NewScreen(terminal.DefaultSize)
		screens[i].Feed([]byte("> "))
	}
	r.ScreenHeap = (heap() - h0) / int64(n)
	runtime.KeepAlive(screens)
	screens = nil

	terms := make([]*terminal.Terminal, 0, n)
	slaves := make([]*os.File, 0, n)
	defer func() {
		for _, t := range terms {
			t.Close()
		}
		for _, s := range slaves {
			s.Close()
		}
	}()
	if t, s, err := terminal.Open(terminal.Options{}); err == nil { // the epoll loops exist before the baseline
		t.Close()
		s.Close()
	}
	h0, g0 := heap(), runtime.NumGoroutine()
	for range n {
		t, s, err := terminal.Open(terminal.Options{})
		if err != nil {
			return r, err
		}
		terms, slaves = append(terms, t), append(slaves, s)
		if _, err := s.Write([]byte("> ")); err != nil {
			return r, err
		}
	}
	for _, t := range terms { // every prompt read and drawn
		for !strings.HasPrefix(t.Text(), ">") {
			time.Sleep(time.Millisecond)
		}
	}
	r.TerminalHeap = (heap() - h0) / int64(n)
	r.Goroutines = runtime.NumGoroutine() - g0
	return r, nil
}

// printReport writes the report of r.
func printReport(w io.Writer, r Results) {
	n := int64(r.N)
	kib := func(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/1024) }
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	pct := func(cpu measure.Ms) string {
		return fmt.Sprintf("%.3f %% of a core", 100*float64(cpu.D())/float64(r.Idle.D()))
	}
	fmt.Fprintf(w, "tend with %d runs of %q, without and with tty = true (%s; %s)\n", r.N, prompt, r.Stamp, r.Source.Describe)
	fmt.Fprintf(w, "machine: %d CPUs, %s, load %s -> %s; tracking: %s\n\n", r.Machine.CPUs, r.Machine.Kernel, r.Machine.LoadStart, r.Machine.LoadEnd, r.Tracking)
	fmt.Fprintf(w, "%-34s %18s %18s\n", "", "plain", "tty")
	row := func(name string, a, b string) { fmt.Fprintf(w, "%-34s %18s %18s\n", name, a, b) }
	row("start (tend up to all running)", r.Plain.Start.D().Round(time.Millisecond).String(), r.TTY.Start.D().Round(time.Millisecond).String())
	row("daemon PSS", mib(r.Plain.Daemon.PSS), mib(r.TTY.Daemon.PSS))
	row("daemon PSS per run", kib(r.Plain.Daemon.PSS/n), kib(r.TTY.Daemon.PSS/n))
	row("daemon anon PSS", mib(r.Plain.Daemon.PSSAnon), mib(r.TTY.Daemon.PSSAnon))
	row("daemon threads", fmt.Sprint(r.Plain.Daemon.Threads), fmt.Sprint(r.TTY.Daemon.Threads))
	row("daemon descriptors", fmt.Sprint(r.Plain.Daemon.FDs), fmt.Sprint(r.TTY.Daemon.FDs))
	row("daemon descriptors per run", fmt.Sprintf("%.2f", float64(r.Plain.Daemon.FDs)/float64(n)), fmt.Sprintf("%.2f", float64(r.TTY.Daemon.FDs)/float64(n)))
	row("daemon idle CPU", pct(r.Plain.DaemonIdle), pct(r.TTY.DaemonIdle))
	row("tend down", r.Plain.Down.D().Round(time.Millisecond).String(), r.TTY.Down.D().Round(time.Millisecond).String())
	row("left behind", fmt.Sprint(r.Plain.Left), fmt.Sprint(r.TTY.Left))
	fmt.Fprintf(w, "\ndescriptors by kind: plain %v\n                     tty   %v\n", r.Plain.Daemon.Kinds, r.TTY.Daemon.Kinds)
	if k := r.TTY.Keeper; k != nil {
		fmt.Fprintf(w, "keeper: PSS %s (RSS %s), %d descriptors (%v), %d threads, idle CPU %s\n",
			mib(k.PSS), mib(k.RSS), k.FDs, k.Kinds, k.Threads, pct(r.TTY.KeeperIdle))
	}
	added := (r.TTY.Daemon.PSS - r.Plain.Daemon.PSS) / n
	fmt.Fprintf(w, "\nadded per tty run in the daemon: PSS %s (target <= 64 KiB), %+.2f descriptors\n",
		kib(added), float64(r.TTY.Daemon.FDs-r.Plain.Daemon.FDs)/float64(n))
	fmt.Fprintf(w, "of which, measured in one process: a 120x40 screen %s of heap; a whole terminal (pty, screen, watch) %s, %d goroutines for %d\n",
		kib(r.InProc.ScreenHeap), kib(r.InProc.TerminalHeap), r.InProc.Goroutines, r.N)
	if k := r.TTY.Keeper; k != nil {
		fmt.Fprintf(w, "with the keeper's share: PSS %s per tty run\n", kib(added+k.PSS/n))
	}
}
