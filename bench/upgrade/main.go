// Command upgrade measures tend upgrade on a real daemon with a large
// fleet: it builds tend, starts `tend up` with -n programs running (each
// run with its notify socket and two output FIFOs: three descriptors to
// hand over), and upgrades it -runs times, each to another build (the
// binary with bytes appended, so its version differs). For each upgrade it
// records how long the new binary took from the exec to serving again
// (the daemon measures it: serving_after_ms of the answer), the whole
// tend upgrade as a client sees it, and the longest time GET /healthz went
// unanswered meanwhile (polled every 5 ms); and it checks that no run was
// restarted or lost (every pid the same, no spawned or exited event) and
// that the daemon's pid did not change.
//
//	go run ./bench/upgrade [-n 1000] [-runs 5]
//	go run ./bench/upgrade -report bench/upgrade/results/STAMP
//
// Results go to bench/upgrade/results/STAMP/ (results.json and
// report.txt). The daemon runs in its own process group and is stopped
// with tend down, else SIGKILL of that group.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// results is what one run of the benchmark keeps.
type results struct {
	Settings struct {
		Programs int `json:"programs"`
		Runs     int `json:"runs"`
	} `json:"settings"`
	Machine  measure.Machine `json:"machine"`
	Source   measure.Source  `json:"source"`
	Upgrades []upgrade       `json:"upgrades"`
}

// upgrade is one tend upgrade.
type upgrade struct {
	From         string     `json:"from"`
	To           string     `json:"to"`
	ServingAfter measure.Ms `json:"exec_to_serving_ms"` // the daemon's own: exec to serving again
	RoundTrip    measure.Ms `json:"round_trip_ms"`      // POST /v1/upgrade, as a client waits for it
	LongestGap   measure.Ms `json:"longest_healthz_gap_ms"`
	Restarted    int        `json:"runs_restarted"` // runs whose pid changed, or were lost
	Events       int        `json:"spawned_or_exited"`
	SamePID      bool       `json:"same_daemon_pid"`
	FDs          int        `json:"daemon_fds_after"`
}

func main() {
	var o results
	flag.IntVar(&o.Settings.Programs, "n", 1000, "running programs")
	flag.IntVar(&o.Settings.Runs, "runs", 5, "upgrades")
	out := flag.String("out", "", "results directory (default bench/upgrade/results/STAMP)")
	again := flag.String("report", "", "write the report of a stored run (its results directory) again, and print it")
	flag.Parse()
	if *again != "" {
		if err := measure.ReadResults(*again, &o); err != nil {
			fmt.Fprintln(os.Stderr, "upgrade:", err)
			os.Exit(1)
		}
		rep := report(&o, filepath.Base(*again))
		fmt.Print(string(rep))
		if err := measure.WriteResults(*again, o, rep); err != nil {
			fmt.Fprintln(os.Stderr, "upgrade:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(&o, *out); err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(1)
	}
}

func run(o *results, out string) error {
	ctx := context.Background()
	root, err := measure.ModuleRoot(must(os.Getwd()))
	if err != nil {
		return err
	}
	stamp := measure.Stamp(time.Now())
	if out == "" {
		out = filepath.Join(root, "bench", "upgrade", "results", stamp)
	}
	o.Machine, o.Source = measure.ReadMachine(), measure.ReadSource(root)
	work, err := os.MkdirTemp("", "tend-upgrade-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "tend")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tend")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as shipped (README)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	d, err := start(bin, work, o.Settings.Programs)
	if err != nil {
		return err
	}
	defer d.stop()
	fmt.Printf("%d programs running\n", o.Settings.Programs)
	for i := range o.Settings.Runs {
		u, err := d.upgradeOnce(bin, i)
		if err != nil {
			return err
		}
		fmt.Printf("upgrade %d: %s -> %s: exec to serving %v, round trip %v, longest /healthz gap %v, %d runs restarted, %d spawned/exited, same pid %v, %d fds\n",
			i+1, u.From, u.To, u.ServingAfter.D(), u.RoundTrip.D(), u.LongestGap.D(), u.Restarted, u.Events, u.SamePID, u.FDs)
		o.Upgrades = append(o.Upgrades, u)
		time.Sleep(time.Second)
	}
	o.Machine.LoadEnd = measure.Loadavg()
	rep := report(o, stamp)
	fmt.Print(string(rep))
	return measure.WriteResults(out, o, rep)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// daemon is the tend up the benchmark runs.
type daemon struct {
	cmd    *exec.Cmd
	dir    string
	conf   string
	client *client.Client
	pids   map[string]int // every run, as first seen
}

func start(bin, dir string, n int) (*daemon, error) {
	var b strings.Builder
	b.WriteString("[daemon]\nstate_dir = \"state\"\n")
	for i := range n {
		fmt.Fprintf(&b, "[program.p%04d]\ncommand = [\"sleep\", \"100000\"]\n", i)
	}
	conf := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "up", "-c", conf)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, dir: dir, conf: conf, client: client.New(filepath.Join(dir, "state", "tend.sock"))}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := d.client.List(false)
		running := 0
		for _, st := range list {
			if st.State == program.StateRunning && st.PID != nil {
				running++
			}
		}
		if err == nil && running == n {
			d.pids = pidsOf(list)
			return d, nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("%d of %d running after 3 minutes", running, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pidsOf(list []program.Status) map[string]int {
	m := map[string]int{}
	for _, st := range list {
		if st.PID != nil {
			m[st.ID] = *st.PID
		}
	}
	return m
}

// upgradeOnce puts another build at bin and upgrades to it.
func (d *daemon) upgradeOnce(bin string, i int) (upgrade, error) {
	var u upgrade
	if err := replace(bin, fmt.Sprintf("\n# build %d\n", i+1)); err != nil {
		return u, err
	}
	evs, err := d.client.Events(0)
	if err != nil || len(evs) == 0 {
		return u, fmt.Errorf("events: %v", err)
	}
	seq := evs[len(evs)-1].Seq
	stop := make(chan struct{})
	var gap time.Duration
	var wg sync.WaitGroup
	wg.Go(func() { gap = longestGap(d.client, stop) })
	t0 := time.Now()
	res, err := d.client.Upgrade(context.Background())
	u.RoundTrip = measure.NewMs(time.Since(t0))
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err != nil {
		return u, fmt.Errorf("tend upgrade: %w", err)
	}
	u.From, u.To = res.From, res.To
	u.ServingAfter = measure.NewMs(time.Duration(res.ServingAfterMS) * time.Millisecond)
	u.LongestGap = measure.NewMs(gap)
	u.SamePID = res.PID == d.cmd.Process.Pid
	list, err := d.client.List(false)
	if err != nil {
		return u, err
	}
	now := pidsOf(list)
	for id, pid := range d.pids {
		if now[id] != pid {
			u.Restarted++
		}
	}
	after, err := d.client.Events(seq)
	if err != nil {
		return u, err
	}
	for _, e := range after {
		if e.Kind == program.KindSpawned || e.Kind == program.KindExited {
			u.Events++
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)); err == nil {
		u.FDs = len(ents)
	}
	return u, nil
}

// longestGap polls GET /healthz until stop and returns the longest time
// between two answers.
func longestGap(c *client.Client, stop chan struct{}) time.Duration {
	last, longest := time.Now(), time.Duration(0)
	for {
		select {
		case <-stop:
			return longest
		default:
		}
		if _, err := c.Health(); err == nil {
			now := time.Now()
			longest = max(longest, now.Sub(last))
			last = now
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replace puts a copy of bin with extra appended at bin (renamed over it:
// the running binary cannot be written).
func replace(bin, extra string) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, append(b, extra...), 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, bin)
}

// stop is tend down, else SIGKILL of the daemon's group.
func (d *daemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	down := exec.Command(d.cmd.Path, "-c", d.conf, "down")
	var out bytes.Buffer
	down.Stdout, down.Stderr = &out, &out
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	if err := down.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "tend down: %v %s", err, out.String())
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// report is the human summary of o.
func report(o *results, stamp string) []byte {
	var b bytes.Buffer
	var serving, trip, gap []time.Duration
	restarted, events, samePID := 0, 0, true
	for _, u := range o.Upgrades {
		serving, trip, gap = append(serving, u.ServingAfter.D()), append(trip, u.RoundTrip.D()), append(gap, u.LongestGap.D())
		restarted += u.Restarted
		events += u.Events
		samePID = samePID && u.SamePID
	}
	fmt.Fprintf(&b, "tend upgrade with %d running programs, %d upgrades (%s; %s, %s)\n", o.Settings.Programs, len(o.Upgrades), stamp, o.Source.Describe, o.Machine.Kernel)
	row := func(name string, ds []time.Duration, target string) {
		fmt.Fprintf(&b, "  %-38s p50 %-9v max %-9v %s\n", name, measure.Percentile(ds, 50).Round(time.Millisecond), measure.Percentile(ds, 100).Round(time.Millisecond), target)
	}
	row("exec to serving again (the daemon's)", serving, "(target: 1 s)")
	row("tend upgrade, as the client waits", trip, "")
	row("longest GET /healthz gap", gap, "")
	fmt.Fprintf(&b, "  runs restarted or lost: %d; spawned or exited events: %d; daemon pid unchanged: %v\n", restarted, events, samePID)
	return b.Bytes()
}
