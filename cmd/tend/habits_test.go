package main

import (
	"encoding/json"
	"fmt"
	"io"
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

// Operator habits (issue 11) against a real daemon: readiness for a pod's
// probe, and backoff counted from the run's start.

// readyz asks GET /readyz over the unix socket.
func readyz(t *testing.T, hc *http.Client) (int, program.Readiness) {
	t.Helper()
	resp, err := hc.Get("http://tend/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r program.Readiness
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("/readyz answered %s %q: %v", resp.Status, b, err)
	}
	return resp.StatusCode, r
}

// TestReadyzFollowsANotifyProgramsReadiness: /readyz, a pod's readiness
// probe, answers 503 naming the instance not ready while a ready = "notify"
// program has not sent READY=1 (the other program runs, /healthz is fine),
// and 200 once it has.
func TestReadyzFollowsANotifyProgramsReadiness(t *testing.T) {
	needSystemdNotify(t)
	dir := t.TempDir()
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	g := newGates(t)
	write(t, conf, fmt.Sprintf(`[program.slow]
shell = '''while [ ! -e "$GATES/ready" ]; do sleep 0.05; done; systemd-notify --ready; exec sleep 100000'''
ready = "notify"
start_timeout = "5m"
env = { GATES = %q }

[program.worker]
command = ["sleep", "100000"]
`, string(g)))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	c := client.New(sock)
	startUp(t, tend, conf)
	t.Cleanup(func() { g.openAll("ready") })
	waitRunning(t, c, "worker:0")
	hc := unixHTTP(sock)
	// The fleet starts asynchronously: slow:0 may not have been spawned yet.
	testutil.Eventually(t, "slow:0 to be starting", func() bool {
		st, _ := c.Status("slow:0")
		return st.State == program.StateStarting
	}, testutil.Explain(eventsOf(c)))

	// Not ready for as long as the program has not said so.
	for range 10 {
		code, r := readyz(t, hc)
		if code != http.StatusServiceUnavailable || r.Ready || r.Instances != 2 || r.ReadyN != 1 || !slices.Equal(r.NotReady, []string{"slow:0"}) {
			t.Fatalf("/readyz before READY=1: %d %+v, want 503 with slow:0 not ready", code, r)
		}
		if st, _ := c.Status("slow:0"); st.State != program.StateStarting {
			t.Fatalf("slow:0 is %s before READY=1", st.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.open(t, "ready")
	testutil.Eventually(t, "/readyz to answer 200", func() bool { code, _ := readyz(t, hc); return code == http.StatusOK }, testutil.Explain(eventsOf(c)))
	if _, r := readyz(t, hc); !r.Ready || r.Instances != 2 || r.ReadyN != 2 || len(r.NotReady) != 0 {
		t.Errorf("/readyz after READY=1: %+v", r)
	}
}

// TestBackoffCountsFromTheRunsStart (docs/restarts.md#the-four-rows, row 4): with backoff_initial
// 2s, a run killed after 2.5 s is restarted at once (backoff ms 0: the wait
// was spent running), and the next one, killed as soon as it runs, waits
// what remains of 4 s (3 to 4 s, read from the events).
func TestBackoffCountsFromTheRunsStart(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.w]
command = ["sleep", "100000"]
backoff_initial = "2s"
backoff_jitter = 0.0
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	startUp(t, tend, conf)
	waitRunning(t, c, "w:0")
	st, _ := c.Status("w:0")
	time.Sleep(time.Until(st.StartedAt.Add(2500 * time.Millisecond)))
	syscall.Kill(*st.PID, syscall.SIGKILL)

	run := func(n int) program.Status {
		var st program.Status
		testutil.Eventually(t, fmt.Sprintf("run %d", n), func() bool {
			st, _ = c.Status("w:0")
			return st.Run == n && st.State == program.StateRunning && st.PID != nil
		}, testutil.Explain(eventsOf(c)))
		return st
	}
	st = run(2)
	syscall.Kill(*st.PID, syscall.SIGKILL)
	run(3)

	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	exits, backoffs, spawns := find(evs, program.KindExited, "w:0"), find(evs, program.KindBackoff, "w:0"), find(evs, program.KindSpawned, "w:0")
	if len(exits) != 2 || len(backoffs) != 2 || len(spawns) != 3 {
		t.Fatalf("want 2 exits, 2 backoffs, 3 spawns:\n%s", dump(evs))
	}
	first, second := backoffs[0].Data.(*program.Backoff), backoffs[1].Data.(*program.Backoff)
	if first.MS != 0 || first.Reason != program.ReasonCrash || first.CrashCount != 1 {
		t.Errorf("after a 2.5 s run: backoff %+v, want ms 0, reason crash, crash_count 1", first)
	}
	// At once: counted from the exit, as before, the wait would be 2 s.
	if gap := spawns[1].TS.Sub(exits[0].TS); gap > time.Second {
		t.Errorf("the 2.5 s run was restarted %s after it ended, not at once", gap)
	}
	if second.MS < 3000 || second.MS > 4000 || second.Reason != program.ReasonCrash || second.CrashCount != 2 {
		t.Errorf("after a short run: backoff %+v, want 3000–4000 ms (4 s from its start), reason crash, crash_count 2", second)
	}
	// The wait itself, from the events: at least 3 s; at most 4 s, plus 2 s
	// for a busy machine.
	if gap := spawns[2].TS.Sub(exits[1].TS); gap < 3*time.Second || gap > 6*time.Second {
		t.Errorf("the short run was restarted %s after it ended, want 3–4 s", gap)
	}
}
