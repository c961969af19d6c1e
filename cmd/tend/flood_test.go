package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// No spin and bounded floods (issue 9) in a real daemon.

// TestZeroBackoffSpawnFailureNeitherSpinsNorStalls: a missing binary with
// backoff_initial = "0s" once failed 21,000 spawns in 8 s and made tend down
// time out. Now: at most ~12 spawn_failed a second (the 100 ms spawn
// floor), /healthz answers all along, and tend down exits 0 in under 5 s
// (the bound; it takes a fraction of a second here).
func TestZeroBackoffSpawnFailureNeitherSpinsNorStalls(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.missing]
command = ["/nonexistent/tend-test-binary"]
backoff_initial = "0s"
backoff_max = "0s"

[program.worker]
command = ["sleep", "100000"]
`)
	sock := filepath.Join(dir, ".tend", "tend.sock")
	c := client.New(sock)
	up := startUp(t, tend, conf)
	waitRunning(t, c, "worker:0")
	failed := func() []program.Event {
		evs, err := c.EventsMatching(0, client.EventFilter{Kinds: []string{program.KindSpawnFailed}, ID: "missing:0"})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	testutil.Eventually(t, "spawns failing", func() bool { return len(failed()) >= 3 })

	// Three seconds of failing spawns, /healthz asked every 50 ms meanwhile.
	hc := unixHTTP(sock)
	hc.Timeout = 10 * time.Second
	from := time.Now()
	for time.Since(from) < 3*time.Second {
		resp, err := hc.Get("http://tend/healthz")
		if err != nil {
			t.Fatalf("/healthz during the spawn failures: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz during the spawn failures: %s", resp.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	to := time.Now()
	n := 0
	for _, e := range failed() {
		if !e.TS.Before(from.Truncate(time.Millisecond)) && !e.TS.After(to) {
			n++
		}
	}
	rate := float64(n) / to.Sub(from).Seconds()
	t.Logf("%d spawn_failed in %s: %.1f a second", n, to.Sub(from).Round(time.Millisecond), rate)
	if n == 0 || rate > 12 {
		t.Errorf("%.1f failed spawns a second, want some and at most 12 (a 100 ms floor)", rate)
	}

	start := time.Now()
	code, out, errOut := tendRun(t, tend, "down", "-c", conf)
	took := time.Since(start)
	if code != 0 || took > 5*time.Second {
		t.Errorf("tend down: exit %d after %s, want 0 within 5s: %s%s", code, took, out, errOut)
	}
	up.Wait()
}

// TestAFlippingNotifierFloodsNothing: two runs flip their notify state in a
// tight loop (X_TEND_TURN=active/idle, RELOADING=1/READY=1). Each costs
// the log at most 25 status_changed in any 2 s (one per 100 ms, coalesced),
// and meanwhile another instance's exits, killed from outside again and
// again, reach an SSE subscriber at once: the median from kill to exited
// event is under 50 ms (the bound; a few ms here).
func TestAFlippingNotifierFloodsNothing(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	flip := helperBinary(t, "tend-flip")
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(`[program.turns]
command = [%q, "turn"]
agent = true

[program.reloads]
command = [%q, "reload"]

[program.victim]
command = ["sleep", "100000"]
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000
`, flip, flip))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	startUp(t, tend, conf)
	waitRunning(t, c, "turns:0", "reloads:0", "victim:0")

	// Exits reach a subscriber: one subscription for the whole test.
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		pid int
		at  time.Time
	}
	exits := make(chan seen, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		c.Follow(ctx, evs[len(evs)-1].Seq, []string{program.KindExited}, "victim:0", func(e program.Event) error {
			exits <- seen{e.Data.(*program.Exited).PID, time.Now()}
			return nil
		})
	}()
	defer func() { cancel(); <-followed }()

	// At least 40 samples, over at least 4 s of flooding.
	var lat []time.Duration
	last := 0
	for begin := time.Now(); len(lat) < 40 || time.Since(begin) < 4*time.Second; {
		var pid int
		testutil.Eventually(t, "the victim's next run", func() bool {
			st, err := c.Status("victim:0")
			if err != nil || st.State != program.StateRunning || st.PID == nil || *st.PID == last {
				return false
			}
			pid = *st.PID
			return true
		}, testutil.Explain(eventsOf(c)))
		last = pid
		killed := time.Now()
		syscall.Kill(pid, syscall.SIGKILL)
		for got := false; !got; {
			select {
			case s := <-exits:
				if s.pid == pid {
					lat, got = append(lat, s.at.Sub(killed)), true
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no exited event for pid %d in 30 s", pid)
			}
		}
	}
	slices.Sort(lat)
	p50 := lat[len(lat)/2]
	t.Logf("kill → exited event over SSE, %d samples: p50 %s, max %s", len(lat), p50, lat[len(lat)-1])
	if p50 >= 50*time.Millisecond {
		t.Errorf("p50 from kill to exited event %s, want under 50ms, while two notifiers flood: %v", p50, lat)
	}

	all, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"turns:0", "reloads:0"} {
		var at []time.Time
		for _, e := range all {
			if e.Kind == program.KindStatusChanged && e.Data.(*program.Status).ID == id {
				at = append(at, e.TS)
			}
		}
		most := 0
		for i := range at {
			j := i
			for j < len(at) && at[j].Sub(at[i]) < 2*time.Second {
				j++
			}
			most = max(most, j-i)
		}
		span := time.Duration(0)
		if len(at) > 0 {
			span = at[len(at)-1].Sub(at[0])
		}
		t.Logf("%s: %d status_changed over %s, at most %d in any 2 s", id, len(at), span.Round(time.Millisecond), most)
		if most > 25 {
			t.Errorf("%s: %d status_changed within 2 s, want at most 25", id, most)
		}
		if len(at) < 4 {
			t.Errorf("%s: %d status_changed in all: is it flipping at all?", id, len(at))
		}
	}
}
