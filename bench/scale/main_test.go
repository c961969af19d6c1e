package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
)

// TestMeasurementsProduceNumbers runs every phase with small fleets (the
// plain fleet as 4 programs x 5 instances), so CI builds and exercises the
// benchmark against the real daemon. It checks that every phase measured
// something, that every subscriber got every event, that the results file
// renders the report, and that nothing is left running and no cgroup
// behind; it never judges speed. It builds tend, so it is skipped under
// -short.
func TestMeasurementsProduceNumbers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tend daemon five times")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := options{ns: []int{20}, offNs: []int{20}, instances: 5, watched: 10, agents: 10, idle: 300 * time.Millisecond, settle: 100 * time.Millisecond,
		requests: 5, cliRuns: 2, cold: 2, coldGap: 100 * time.Millisecond, loadRuns: 2, sweeps: 3, kills: 5, subscribers: 5, notifies: 5,
		gap: 10 * time.Millisecond, upTimeout: time.Minute, stall: 30 * time.Second}
	var progress bytes.Buffer
	res, err := run(ctx, o, &progress)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if kids := measure.Children(); len(kids) > 0 {
		t.Errorf("children left: %v", kids)
	}
	if len(res.Fleets) != 5 {
		t.Fatalf("%d fleets, want 5", len(res.Fleets))
	}
	for _, f := range res.Fleets {
		if f.Error != "" || f.Running != f.N || f.Spawned < f.N || f.Failed != 0 {
			t.Errorf("%s: error %q, %d running, %d spawned, %d failed of %d", f.Label, f.Error, f.Running, f.Spawned, f.Failed, f.N)
		}
		if f.AllRunning <= 0 || f.Answered <= 0 || f.Answered > f.AllRunning || f.LastSpawn <= 0 || f.Tracking == "" {
			t.Errorf("%s start: answered %v, all running %v, last spawn %v, tracking %q", f.Label, f.Answered.D(), f.AllRunning.D(), f.LastSpawn.D(), f.Tracking)
		}
		if f.Mem.PSS <= 0 || f.Mem.RSS < f.Mem.PSS || f.Mem.FDs <= 0 || len(f.Mem.FDKinds) == 0 || f.Idle.Elapsed.D() < o.idle || f.Idle.Run < 0 {
			t.Errorf("%s: memory %+v, idle %+v", f.Label, f.Mem, f.Idle)
		}
		if f.Groups != "" {
			if _, err := os.Stat(f.Groups); !os.IsNotExist(err) {
				t.Errorf("%s: the daemon's cgroups %s are left (%v)", f.Label, f.Groups, err)
			}
		}
		if f.DownCLI <= 0 || f.DownExit <= 0 {
			t.Errorf("%s down: cli %v, exit %v", f.Label, f.DownCLI.D(), f.DownExit.D())
		}
		if f.Peak.Samples == 0 || f.Peak.PSS < f.Mem.PSS || f.Peak.RSS < f.Peak.PSS || f.Peak.HighWater <= 0 || f.Peak.PSSPhase == "" {
			t.Errorf("%s: peak %+v against %+v at rest", f.Label, f.Peak, f.Mem)
		}
	}
	for _, f := range res.Fleets[:2] {
		if f.Programs != 4 || f.Instances != 5 {
			t.Errorf("%s fleet of %d x %d", f.Label, f.Programs, f.Instances)
		}
		if len(f.StatusCold) != o.cold || len(f.PSCold) != o.cold || len(f.Status) != o.requests || len(f.StatusRaw) != o.requests ||
			len(f.PS) != o.cliRuns || len(f.StatusCLI) != o.cliRuns || len(f.Hello) != o.cliRuns || f.StatusBytes <= 0 {
			t.Errorf("%s listings: %d cold, %d cold ps, %d status, %d raw, %d ps, %d status CLI, %d hello, %d bytes", f.Label, len(f.StatusCold),
				len(f.PSCold), len(f.Status), len(f.StatusRaw), len(f.PS), len(f.StatusCLI), len(f.Hello), f.StatusBytes)
		}
	}
	if f := res.Fleets[0]; f.Label != labelPlain || f.Floor == nil || f.Floor.Started != f.N || f.Floor.Took <= 0 || f.Floor.Error != "" {
		t.Errorf("%s: floor %+v", f.Label, f.Floor)
	}
	if f := res.Fleets[1]; f.Label != labelPlainOff || f.Cgroup != "off" || f.Floor != nil {
		t.Errorf("the other mode's fleet: %s, cgroup %q, floor %v", f.Label, f.Cgroup, f.Floor)
	}
	if len(res.ConfigLoad) != 2 || len(res.ConfigLoad[1].Samples) != o.loadRuns || res.ConfigLoad[1].Instances != 5 {
		t.Errorf("config loads: %+v", res.ConfigLoad)
	}
	if mr := res.MemoryReads; mr == nil || (len(mr.CPU) != o.sweeps && mr.NotMeasured == "") {
		t.Errorf("memory reads: %+v", mr)
	} else if len(mr.CPU) == o.sweeps && mr.Groups != o.watched {
		t.Errorf("memory reads of %d groups, want %d", mr.Groups, o.watched)
	}
	e := res.Events
	if e == nil || len(e.Alone) != o.kills || len(e.Crowd) != o.kills || e.Published <= 0 || e.Delivered != e.Published {
		t.Fatalf("fan-out: %+v", e)
	}
	for _, d := range append(e.Alone, e.Crowd...) {
		if d <= 0 {
			t.Errorf("kill -> exited of %v", d.D())
		}
	}
	if len(e.Notify) != o.notifies || len(e.NotifyRequests) < o.notifies {
		t.Errorf("notify: %d samples, %d requests", len(e.Notify), len(e.NotifyRequests))
	}

	pr, err := peers.Load("../peers/results/20261202T145158Z")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := save(t.TempDir(), res, pr)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := measure.ReadResults(dir, &back); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	printReport(&a, []Results{res}, pr)
	printReport(&b, []Results{back}, pr)
	saved, _ := os.ReadFile(filepath.Join(dir, measure.ReportFile))
	if a.String() != b.String() || string(saved) != b.String() {
		t.Errorf("the report of the file differs from the run's:\n%s\n---\n%s", b.String(), a.String())
	}
	for _, want := range []string{"N = 20 (4 programs x 5)", "cgroup off (group)", "start -> all running", "Go loop starting as many sleeps",
		"daemon PSS, peak", "tend ps, cold, median", "tend status ID over hello", "descriptors per running instance", "tend status ID, median",
		"idle CPU, 10 idle agents", "idle CPU, max_rss, cgroup off on 10", "config load, 20 programs x 1", "added by the crowd, p50",
		"STATUS= sent -> GET status, p50", "bench/peers run 20261202T145158Z"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// The report of the peers' figures: the tools that did not finish say so,
// tend's own figure is set apart.
func TestPeerColumns(t *testing.T) {
	pr, err := peers.Load("../peers/results/20261202T145158Z")
	if err != nil {
		t.Fatal(err)
	}
	pc := peerCols{pr, 1000}
	if got := pc.scale("up"); !strings.HasPrefix(got, "s6 2.7 s, runit 6.7 s") || !strings.HasSuffix(got, "; tend there 3.0 s") {
		t.Errorf("up at 1000: %q", got)
	}
	pr.Scale["pm2"][1000] = []peers.Scale{{Error: "did not finish in 10 min: 300 of 1000 running after 600 s"}}
	if got := pc.scale("pss"); !strings.Contains(got, "pm2: did not finish in 10 min") {
		t.Errorf("pss at 1000 with pm2 cut short: %q", got)
	}
	if got := pc.cli(); !strings.Contains(got, "runit") || !strings.Contains(got, "tend there") {
		t.Errorf("one CLI call: %q", got)
	}
	if got := pc.scale("list_cold"); strings.Contains(got, " ms") {
		t.Errorf("cold listings of a run that had none: %q", got)
	}
}

func TestParseNotify(t *testing.T) {
	sent, n, ok := parseNotify("t=1764672000123456789 n=42")
	if !ok || n != 42 || sent.UnixNano() != 1764672000123456789 {
		t.Errorf("parseNotify = %v, %d, %v", sent, n, ok)
	}
	for _, bad := range []string{"", "t=1", "n=1 t=2", "t=x n=1", "t=1 n=y", "ready"} {
		if _, _, ok := parseNotify(bad); ok {
			t.Errorf("parseNotify(%q) accepted", bad)
		}
	}
}

func TestFleetConfig(t *testing.T) {
	cfg := fleetConfig(2, 3, "/bin/sleep", maxRSSDefaults, "off")
	for _, want := range []string{"cgroup = \"off\"", "[defaults]\nmax_rss = \"1GiB\"", "[program.p0]\ncommand = [\"/bin/sleep\", \"100000\"]\ninstances = 3", "[program.p1]"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	plain := fleetConfig(1, 1, "/bin/sleep", "", "")
	for _, bad := range []string{"[defaults]", "instances", "cgroup"} {
		if strings.Contains(plain, bad) {
			t.Errorf("a plain config has %q:\n%s", bad, plain)
		}
	}
}

func TestConfigShapes(t *testing.T) {
	got := configShapes([]int{100, 10000}, 1)
	want := [][2]int{{100, 1}, {10000, 1}, {1000, 10}}
	if !slices.Equal(got, want) {
		t.Errorf("shapes %v, want %v", got, want)
	}
	if got := configShapes([]int{1000}, 10); !slices.Equal(got, [][2]int{{1000, 1}, {100, 10}}) {
		t.Errorf("shapes with 10 instances: %v", got)
	}
}

// The peers' cold listings, peaks and floor, from a run of the issue-22 harness.
func TestPeerColumnsIssue22(t *testing.T) {
	pr, err := peers.Load("../internal/peers/testdata/issue22")
	if err != nil {
		t.Fatal(err)
	}
	pc := peerCols{pr, 1000}
	if v, ok := pc.listCold("runit"); !ok || v <= 0 {
		t.Errorf("runit's cold listing %v %v", v, ok)
	}
	for _, what := range []string{"list_cold", "peak_pss", "up_floor"} {
		if got := pc.scale(what); !strings.HasPrefix(got, "runit ") || !strings.Contains(got, "; tend there ") {
			t.Errorf("%s: %q", what, got)
		}
	}
	if got := pc.floor(); !strings.HasPrefix(got, "go-floor there: all running ") {
		t.Errorf("floor: %q", got)
	}
}
