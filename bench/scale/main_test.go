package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// TestMeasurementsProduceNumbers runs every phase with a small fleet, so CI
// builds and exercises the benchmark against the real daemon. It checks only
// that each phase measured something and that nothing is left running; it
// never judges speed. It builds tend, so it is skipped under -short.
func TestMeasurementsProduceNumbers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tend daemon three times")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := options{n: 20, idle: 300 * time.Millisecond, settle: 100 * time.Millisecond, requests: 5, psRuns: 2,
		kills: 5, subscribers: 5, notifies: 5, gap: 10 * time.Millisecond}
	var progress bytes.Buffer
	res, err := run(ctx, o, &progress)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	for name, f := range map[string]fleetResult{"fleet": res.fleet, "fleet with max_rss": res.watched} {
		if f.allRunning <= 0 || f.answered <= 0 || f.answered > f.allRunning || f.lastSpawn <= 0 {
			t.Errorf("%s start: answered %v, all running %v, last spawn %v", name, f.answered, f.allRunning, f.lastSpawn)
		}
		if f.mem.pss <= 0 || f.mem.rss < f.mem.pss || f.idle.elapsed < o.idle || f.idle.run < 0 {
			t.Errorf("%s: memory %+v, idle %+v", name, f.mem, f.idle)
		}
		if f.downCLI <= 0 || f.downExit <= 0 {
			t.Errorf("%s down: cli %v, exit %v", name, f.downCLI, f.downExit)
		}
	}
	f := res.fleet
	if len(f.status) != o.requests || len(f.statusRaw) != o.requests || len(f.ps) != o.psRuns || f.statusSize <= 0 {
		t.Errorf("listings: %d status, %d raw, %d ps, %d bytes", len(f.status), len(f.statusRaw), len(f.ps), f.statusSize)
	}
	fo := res.fanout
	if len(fo.alone) != o.kills || len(fo.crowd) != o.kills || fo.published <= 0 || fo.delivered != fo.published {
		t.Errorf("fan-out: %d and %d samples (want %d each), %d of %d events delivered",
			len(fo.alone), len(fo.crowd), o.kills, fo.delivered, fo.published)
	}
	for _, d := range append(fo.alone, fo.crowd...) {
		if d <= 0 {
			t.Errorf("kill -> exited of %v", d)
		}
	}
	if len(res.notify.lat) != o.notifies || len(res.notify.requests) < o.notifies {
		t.Errorf("notify: %d samples, %d requests", len(res.notify.lat), len(res.notify.requests))
	}
	if kids := measure.Children(); len(kids) > 0 {
		t.Errorf("children left: %v", kids)
	}

	var out bytes.Buffer
	printReport(&out, o, res)
	for _, want := range []string{"start -> all 20 running", "daemon PSS", "idle CPU, max_rss on all", "tend down", "added by the crowd, p50", "STATUS= sent -> GET status, p50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
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
	cfg := fleetConfig(2, "/bin/sleep", maxRSSDefaults)
	for _, want := range []string{"[defaults]\nmax_rss = \"1GiB\"", "[program.p0]\ncommand = [\"/bin/sleep\", \"100000\"]", "[program.p1]"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(fleetConfig(1, "/bin/sleep", ""), "[defaults]") {
		t.Error("a config without defaults has a [defaults] table")
	}
}
