package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// gatedAgent is an agent held in a turn until the file gate exists.
func gatedAgent(t *testing.T, name string, grace time.Duration) (program.Spec, string) {
	gate := filepath.Join(t.TempDir(), "gate")
	s := fakeSpec(name, "gated-turn")
	s.Env["TEND_GATE"] = gate
	s.Agent, s.TurnGrace = true, grace
	return s, gate
}

func inTurn(h *harness, id string) func() bool {
	return func() bool {
		snap := h.snapshot(id)
		return snap.Turn != nil && *snap.Turn && snap.Status.PID != nil
	}
}

func TestRestartWaitsForTheTurnToEnd(t *testing.T) {
	h := newHealthHarness(t)
	s, gate := gatedAgent(t, "planner", time.Minute)
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the agent in its turn", inTurn(h, "planner:0"))
	pid := pidOf(h.status("planner:0"))
	outs, err := h.mgr.Restart(context.Background(), "planner:0", program.ActOptions{}) // --no-wait
	if err != nil || len(outs) != 1 || !outs[0].OK {
		t.Fatalf("restart: %+v %v", outs, err)
	}
	// Stopping, unsignalled: the same process stays alive well past a settle period.
	time.Sleep(time.Second)
	st := h.status("planner:0")
	if st.State != program.StateStopping || pidOf(st) != pid || !alive(pid) {
		t.Fatalf("during the turn: state %s pid %d (was %d) alive %v", st.State, pidOf(st), pid, alive(pid))
	}
	if snap := h.snapshot("planner:0"); snap.TurnWait.IsZero() || snap.Stopping != "restart" {
		t.Fatalf("snapshot does not say it waits: %+v", snap)
	}
	if n := len(h.matching(program.KindExited, "planner:0")); n != 0 {
		t.Fatalf("%d exits during the turn", n)
	}
	os.WriteFile(gate, nil, 0o600)
	h.waitFor("a new run", func() bool { p := pidOf(h.status("planner:0")); return p != 0 && p != pid })
	ex := h.matching(program.KindExited, "planner:0")
	if len(ex) != 1 || data[program.Exited](ex[0]).LikelyCause != program.CauseOperatorRestart || data[program.Exited](ex[0]).CrashCount != 0 {
		t.Fatalf("exits: %s", h.dump())
	}
	if len(h.matching(program.KindHealthWarn, "planner:0")) != 0 {
		t.Fatal("a turn that ended in time warned")
	}
}

func TestTurnGraceRunsOut(t *testing.T) {
	h := newHealthHarness(t)
	s, _ := gatedAgent(t, "stuck", time.Second) // the gate never opens
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the agent in its turn", inTurn(h, "stuck:0"))
	pid := pidOf(h.status("stuck:0"))
	start := time.Now()
	outs, _ := h.mgr.Restart(context.Background(), "stuck:0", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].OK {
		t.Fatalf("restart: %+v\n%s", outs, h.dump())
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("restarted after %v, within the 1 s turn_grace", took)
	}
	if p := pidOf(h.status("stuck:0")); p == pid || alive(pid) {
		t.Fatalf("old run %d alive %v, now %d", pid, alive(pid), p)
	}
	warns := h.matching(program.KindHealthWarn, "stuck:0")
	if len(warns) != 1 || data[program.HealthWarn](warns[0]).Reason != program.WarnTurnGrace {
		t.Fatalf("want one turn_grace_expired:\n%s", h.dump())
	}
}

func TestStopNowSkipsTheTurnWait(t *testing.T) {
	h := newHealthHarness(t)
	s, _ := gatedAgent(t, "chat", time.Hour)
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the agent in its turn", inTurn(h, "chat:0"))
	pid := pidOf(h.status("chat:0"))
	h.mgr.Stop(context.Background(), "chat:0", program.ActOptions{}) // waits for the turn
	h.waitFor("the wait", func() bool { return !h.snapshot("chat:0").TurnWait.IsZero() })
	outs, _ := h.mgr.Stop(context.Background(), "chat:0", program.ActOptions{Wait: true, Now: true})
	if len(outs) != 1 || !outs[0].OK || alive(pid) || h.status("chat:0").State != program.StateStopped {
		t.Fatalf("stop --now: %+v alive %v state %s", outs, alive(pid), h.status("chat:0").State)
	}
}

func TestMemoryAndWedgeRestartsNeverWaitForATurn(t *testing.T) {
	h := newHealthHarness(t)
	s, _ := gatedAgent(t, "hung", time.Hour)
	s.Watchdog = time.Second // the gated agent never beats
	s.WedgeRestartGrace = time.Second
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a wedge restart", func() bool { return len(h.matching(program.KindWedged, "hung:0")) > 0 && h.status("hung:0").Run >= 2 })
}

func TestAFloodOfNotifyMessagesLosesNoReady(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("flood", "flood")
	s.Agent, s.Ready, s.StartTimeout = true, program.ReadyNotify, 20*time.Second
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("READY=1 through the flood", func() bool {
		st := h.status("flood:0")
		return st.Ready && st.StatusText == "ready in the flood"
	})
	if n := len(h.matching(program.KindExited, "flood:0")); n != 0 {
		t.Fatalf("the run ended: %s", h.dump())
	}
}

func TestANewRunStartsBetweenTurns(t *testing.T) {
	// A run killed in the middle of a turn must not make the next one "in a turn".
	h := newHealthHarness(t)
	s, _ := gatedAgent(t, "crashy", 0)
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the agent in its turn", inTurn(h, "crashy:0"))
	pid := pidOf(h.status("crashy:0"))
	syscall.Kill(pid, syscall.SIGKILL)
	h.waitFor("the next run", func() bool { p := pidOf(h.status("crashy:0")); return p != 0 && p != pid })
	// The new run enters a turn of its own soon; until its X_TEND_TURN
	// arrives, its reports must not carry the old run's turn.
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, snap := range h.reports {
		if snap.Status.ID == "crashy:0" && snap.Status.Run == 2 && snap.Status.PID != nil {
			if snap.Turn != nil {
				t.Fatalf("the new run's first report carries a turn: %v", *snap.Turn)
			}
			return
		}
	}
	t.Fatal("no report of the new run")
}
