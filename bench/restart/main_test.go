package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
	"github.com/tend-sh/tend/internal/program"
)

// TestMeasurementsProduceNumbers runs every phase briefly, so CI compiles
// and exercises the benchmark. It checks that each phase measured
// something, that the results file holds every sample and renders the same
// report, and that no child or cgroup is left; it never judges speed. One
// test does it all because the reaper, once started, owns wait4 for the
// whole test binary: the baseline has to come first.
func TestMeasurementsProduceNumbers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := options{duration: 300 * time.Millisecond, warmup: 100 * time.Millisecond, kills: 10, gap: 20 * time.Millisecond,
		defaultKills: 2, age: 1100 * time.Millisecond, ages: repeatAges{elapsed: 2100 * time.Millisecond, waiting: 1100 * time.Millisecond}}
	var progress bytes.Buffer
	res, err := run(ctx, o, &progress)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if kids := measure.Children(); len(kids) > 0 {
		t.Errorf("children left: %v", kids)
	}
	if res.Cgroup.Dir != "" {
		if _, err := os.Stat(res.Cgroup.Dir); !os.IsNotExist(err) {
			t.Errorf("cgroup directory %s left behind (%v)", res.Cgroup.Dir, err)
		}
	} else {
		t.Logf("cgroup variants not measured: %s", res.Cgroup.NotMeasured)
	}
	variants := 1
	if res.Cgroup.Dir != "" {
		variants = 2
	}
	if b := res.Baseline; b.Spawns <= 0 || b.rate() <= 0 {
		t.Errorf("baseline: %+v", b)
	}
	if len(res.Crash) != variants {
		t.Fatalf("%d crash loops, want %d", len(res.Crash), variants)
	}
	for _, c := range res.Crash {
		if c.Restarts <= 0 || c.rate() <= 0 || c.CPU <= 0 || c.Events <= 0 {
			t.Errorf("crash loop: %+v", c)
		}
	}
	if len(res.Latency) != 4*variants {
		t.Fatalf("%d latency variants, want %d", len(res.Latency), 4*variants)
	}
	for _, l := range res.Latency {
		want, age := o.kills, time.Duration(0)
		switch l.Config {
		case configDefault:
			want, age = o.defaultKills, o.age
		case configRepeatElapsed:
			want, age = o.defaultKills/2, o.ages.elapsed
		case configRepeatWaiting:
			want, age = o.defaultKills/2, o.ages.waiting
		}
		if l.Config != configZero {
			if len(l.Ages) != want || len(l.Backoffs) != want {
				t.Errorf("%s/%s: %d ages, %d backoffs", l.Config, l.Tracking, len(l.Ages), len(l.Backoffs))
			}
			for _, a := range l.Ages {
				if a.D() < age {
					t.Errorf("%s/%s: a run killed %v old, want %v", l.Config, l.Tracking, a.D(), age)
				}
			}
			for i, b := range l.Backoffs {
				// Only a second run killed within its backoff waits, and then
				// the replacement comes after the wait announced.
				if waits := l.Config == configRepeatWaiting; waits != (b > 0) || (waits && l.Spawned[i] < b) {
					t.Errorf("%s/%s: backoff %v announced, replacement after %v", l.Config, l.Tracking, b.D(), l.Spawned[i].D())
				}
			}
		}
		if len(l.Exited) != want || len(l.Spawned) != want {
			t.Fatalf("%s/%s: %d exited and %d spawned samples, want %d", l.Config, l.Tracking, len(l.Exited), len(l.Spawned), want)
		}
		for i := range l.Exited {
			if l.Exited[i] <= 0 || l.Spawned[i] < l.Exited[i] {
				t.Errorf("%s/%s kill %d: exited after %v, replacement after %v", l.Config, l.Tracking, i, l.Exited[i].D(), l.Spawned[i].D())
			}
		}
	}

	// The report is derived from the file, and the file from the run.
	dir := t.TempDir()
	pr, err := peers.Load("../peers/results/20261202T145158Z")
	if err != nil {
		t.Fatal(err)
	}
	saved, err := save(dir, res, pr)
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := measure.ReadResults(saved, &back); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	printReport(&a, []Results{res}, pr)
	printReport(&b, []Results{back}, pr)
	if a.String() != b.String() {
		t.Errorf("the report of the file differs from the run's:\n%s\n---\n%s", b.String(), a.String())
	}
	saved2, _ := os.ReadFile(saved + "/" + measure.ReportFile)
	if string(saved2) != b.String() {
		t.Errorf("report.txt is not the report of results.json")
	}
	out := b.String()
	wants := []string{"crash loop restarts, zero backoff", "kill -> exited event, p50 (zero backoff)",
		"default config, first crash", "repeated crash, backoff elapsed", "repeated crash, backoff ahead", "past that wait",
		"runit", "bench/peers run 20261202T145158Z"}
	if variants == 2 {
		wants = append(wants, "without cgroups (group)", "cgroup placement adds, p50 (zero backoff)", "  cgroup placement adds, p50")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Two runs: every figure becomes a range.
	var two bytes.Buffer
	printReport(&two, []Results{res, back}, nil)
	if !strings.Contains(two.String(), "min – max over the 2 runs") {
		t.Errorf("report of two runs:\n%s", two.String())
	}
	_ = program.TrackingCgroup
}
