package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// TestMeasurementsProduceNumbers runs every phase briefly, so CI compiles
// and exercises the benchmark. It checks only that each phase measured
// something and that no child is left; it never judges speed. One test does
// it all because the reaper, once started, owns wait4 for the whole test
// binary: the baseline has to come first.
func TestMeasurementsProduceNumbers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := options{duration: 300 * time.Millisecond, warmup: 100 * time.Millisecond, kills: 10, gap: 20 * time.Millisecond}
	var progress bytes.Buffer
	res, err := run(ctx, o, &progress)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	b, c, l := res.baseline, res.crash, res.latency
	if b.spawns <= 0 || b.rate() <= 0 {
		t.Errorf("baseline: %d spawns, %.1f/s", b.spawns, b.rate())
	}
	if c.restarts <= 0 || c.rate() <= 0 || c.cpu <= 0 || c.events <= 0 {
		t.Errorf("crash loop: %+v", c)
	}
	if len(l.exited) != o.kills || len(l.spawned) != o.kills {
		t.Fatalf("latency: %d exited and %d spawned samples, want %d", len(l.exited), len(l.spawned), o.kills)
	}
	for i := range l.exited {
		if l.exited[i] <= 0 || l.spawned[i] < l.exited[i] {
			t.Errorf("kill %d: exited after %v, replacement after %v", i, l.exited[i], l.spawned[i])
		}
	}
	if kids := measure.Children(); len(kids) > 0 {
		t.Errorf("children left: %v", kids)
	}

	var out bytes.Buffer
	printReport(&out, o, res)
	for _, want := range []string{"crash loop restarts", "kill -> exited event, p50", "kill -> replacement exec'd, p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
