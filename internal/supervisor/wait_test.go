package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestRestartWithWaitReturnsOnceTheNewRunRuns(t *testing.T) {
	h := newHarness(t)
	up := filepath.Join(t.TempDir(), "up")
	s := spec("stubborn", "/bin/sh", "-c", "trap '' TERM; touch \"$0\"; while :; do sleep 0.1; done", up)
	s.StopGrace = 1500 * time.Millisecond
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the trap set", func() bool { _, err := os.Stat(up); return err == nil })
	old := pidOf(h.status("stubborn:0"))
	start := time.Now()
	outs, err := h.mgr.Restart(context.Background(), "stubborn", program.ActOptions{Wait: true})
	if err != nil || len(outs) != 1 || !outs[0].Done || !outs[0].OK {
		t.Fatalf("restart: %+v %v", outs, err)
	}
	st := h.status("stubborn:0")
	if took := time.Since(start); took < s.StopGrace {
		t.Errorf("returned after %v, before the stop_grace the old run needed", took)
	}
	if alive(old) || pidOf(st) == 0 || pidOf(st) == old || st.State != program.StateRunning || !alive(pidOf(st)) {
		t.Fatalf("after restart: old %d alive %v, now %+v", old, alive(old), st)
	}
}

func TestStopWithWaitReturnsWhenEveryProcessIsGone(t *testing.T) {
	h := newHarness(t)
	s := spec("family", "/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait")
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("running", func() bool { return h.status("family:0").State == program.StateRunning })
	pid := pidOf(h.status("family:0"))
	h.waitFor("children", func() bool { return len(groupMembers(pid)) == 3 })
	outs, _ := h.mgr.Stop(context.Background(), "family:0", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].OK {
		t.Fatalf("stop: %+v", outs)
	}
	if st := h.status("family:0"); st.State != program.StateStopped || alive(pid) {
		t.Fatalf("after stop: state %s, leader alive %v", st.State, alive(pid))
	}
	// Signalled and then killed with the group as the leader ended, the
	// children are gone at once (exactly so with cgroups, where the stop
	// waits for the group to be empty: see the cgroup tests).
	h.waitFor("the group to be empty", func() bool { return len(groupMembers(pid)) == 0 })
}

func TestStartOfAMissingBinaryFailsWithinTheFloor(t *testing.T) {
	h := newHarness(t)
	s := spec("ghost", "/nonexistent/ghost")
	s.Autostart = false
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	outs, _ := h.mgr.Start(ctx, "ghost", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].Done || outs[0].OK {
		t.Fatalf("start of a missing binary: %+v", outs)
	}
}

func TestZeroBackoffSpawnFailureNeitherSpinsNorBlocksAStop(t *testing.T) {
	h := newHarness(t)
	s := spec("spin", "/nonexistent/spin")
	s.BackoffInitial, s.BackoffMax, s.BackoffJitter = 0, 0, 0
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	n := len(h.matching(program.KindSpawnFailed, "spin:0"))
	if n < 2 || n > 11 { // one per 100 ms floor, at most
		t.Errorf("%d spawn failures in a second with backoff 0; want the 100 ms floor to bound them", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outs, _ := h.mgr.Stop(ctx, "spin", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].OK || h.status("spin:0").State != program.StateStopped {
		t.Fatalf("stop: %+v state %s", outs, h.status("spin:0").State)
	}
}

func TestZeroDelayRestartsStayStoppable(t *testing.T) {
	// A program that exits at once with restart always and no backoff
	// (clean exits restart at once) must still take a stop between runs.
	h := newHarness(t)
	s := spec("blink", "/bin/true")
	s.CleanRestartBudget = 1 << 30
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a few runs", func() bool { return h.status("blink:0").Run > 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outs, _ := h.mgr.Stop(ctx, "blink", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].OK {
		t.Fatalf("stop: %+v", outs)
	}
	runs := h.status("blink:0").Run
	time.Sleep(200 * time.Millisecond)
	if h.status("blink:0").Run != runs {
		t.Fatal("it ran again after the stop")
	}
}

func TestRestartWaitFailsWhenTheNewRunNeverGetsReady(t *testing.T) {
	if _, err := exec.LookPath("systemd-notify"); err != nil {
		testutil.Missing(t, "systemd-notify not installed (CI installs systemd)")
	}
	h := newHealthHarness(t)
	s := spec("flaky", "/bin/sh", "-c", `if [ -e "$0" ]; then exit 3; fi; touch "$0"; systemd-notify --ready; exec sleep 1000`, t.TempDir()+"/once")
	s.Ready, s.BackoffInitial, s.BackoffMax = program.ReadyNotify, 5*time.Second, 5*time.Second
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("ready", func() bool { return h.status("flaky:0").Ready })
	outs, _ := h.mgr.Restart(context.Background(), "flaky", program.ActOptions{Wait: true})
	// The new run exits 3 before READY=1: the restart did not get a running run.
	if len(outs) != 1 || !outs[0].Done || outs[0].OK {
		t.Fatalf("restart: %+v\n%s", outs, h.dump())
	}
	if st := h.status("flaky:0"); st.State != program.StateBackoff {
		t.Fatalf("state %s, want backoff", st.State)
	}
}
