package supervisor

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

func TestMissingBinaryIsACrashAndTheLoopSettles(t *testing.T) {
	h := newHarness(t)
	s := spec("ghost", "/nonexistent/ghost-binary")
	s.HardMaxCrashes, s.MaxCrashes = 3, 2
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("fatal", func() bool { return h.status("ghost:0").State == program.StateFatal })
	failed := h.matching(program.KindSpawnFailed, "ghost:0")
	exited := h.matching(program.KindExited, "ghost:0")
	if len(failed) != 3 || len(exited) != 3 {
		t.Fatalf("%d spawn_failed and %d exited, want 3 and 3\n%s", len(failed), len(exited), h.dump())
	}
	if f := data[program.SpawnFailed](failed[0]); f.Errno != "ENOENT" {
		t.Errorf("spawn_failed errno %q, want ENOENT (error %q)", f.Errno, f.Error)
	}
	for i, e := range exited {
		x := data[program.Exited](e)
		if x.Code != nil || x.Signal != nil || x.LikelyCause != program.CauseSpawnFailed || x.CrashCount != i+1 {
			t.Errorf("exited %d: %+v", i, x)
		}
	}
	if g := h.matching(program.KindGaveUp, "ghost:0"); len(g) != 1 || data[program.GaveUp](g[0]).CrashCount != 3 {
		t.Errorf("gave_up: %v", g)
	}
	if w := h.matching(program.KindHealthWarn, "ghost:0"); len(w) != 1 || data[program.HealthWarn](w[0]).Reason != program.WarnCrashDegraded {
		t.Errorf("health_warn: %v", w)
	}
}

func TestBadCwdIsASpawnFailureNotAHang(t *testing.T) {
	h := newHarness(t)
	s := spec("lost", "/bin/true")
	s.Cwd = "/nonexistent/dir"
	s.HardMaxCrashes = 1
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("fatal", func() bool { return h.status("lost:0").State == program.StateFatal })
	if f := h.matching(program.KindSpawnFailed, "lost:0"); len(f) != 1 || data[program.SpawnFailed](f[0]).Errno != "ENOENT" {
		t.Fatalf("spawn_failed: %+v", f)
	}
}

func TestOperatorRestartOfATermIgnoringChild(t *testing.T) {
	h := newHarness(t)
	// The sleep inherits the ignored TERM (an ignored signal stays ignored
	// across exec), so only the SIGKILL after stop_grace ends it: if it is
	// gone, tend killed it.
	s := spec("stubborn", "/bin/sh", "-c", "trap '' TERM; echo up; sleep 1000; echo unreachable")
	s.StopGrace = 300 * time.Millisecond
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the TERM trap to be set", func() bool {
		return h.output("stubborn:0") == "up\n"
	})
	old := pidOf(h.status("stubborn:0"))
	if _, err := h.mgr.Restart(context.Background(), "stubborn:0", program.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a new run", func() bool {
		st := h.status("stubborn:0")
		return st.State == program.StateRunning && pidOf(st) != old && pidOf(st) != 0
	})
	st := h.status("stubborn:0")
	if alive(old) { // the leader was reaped before the new run started
		t.Errorf("old run %d survived the restart", old)
	}
	// The rest of the group was sent SIGKILL; on a loaded machine a killed
	// process can take a moment to leave /proc (it was seen as "survived"
	// once in CI), so wait for the kernel rather than read it at one instant.
	h.waitFor("the old run's group to be gone", func() bool { return len(groupMembers(old)) == 0 })
	if !alive(pidOf(st)) {
		t.Errorf("new run %d is not alive", pidOf(st))
	}
	if st.CrashCount != 0 || st.Restarts.OperatorRestart != 1 || st.Run != 2 {
		t.Errorf("after restart: crash_count %d restarts %+v run %d", st.CrashCount, st.Restarts, st.Run)
	}
	x := data[program.Exited](h.matching(program.KindExited, "stubborn:0")[0])
	if x.LikelyCause != program.CauseOperatorRestart || x.Signal == nil || *x.Signal != "SIGKILL" {
		t.Errorf("exited: %+v (signal %v)", x, x.Signal)
	}
	b := data[program.Backoff](h.matching(program.KindBackoff, "stubborn:0")[0])
	if b.Reason != program.ReasonOperatorRestart || b.MS != 0 {
		t.Errorf("backoff: %+v", b)
	}
}

func TestStopLeavesNoGrandchild(t *testing.T) {
	h := newHarness(t)
	s := spec("forker", "/bin/sh", "-c", "sleep 1000 & sleep 1000 & wait")
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	var pid int
	h.waitFor("the grandchildren", func() bool {
		pid = pidOf(h.status("forker:0"))
		return pid != 0 && len(groupMembers(pid)) == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.mgr.Stop(ctx, "forker", program.ActOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if st := h.status("forker:0"); st.State != program.StateStopped || st.PID != nil {
		t.Errorf("after stop: state %s pid %v", st.State, st.PID)
	}
	h.waitFor("the group to be gone", func() bool { return len(groupMembers(pid)) == 0 })
	x := data[program.Exited](h.matching(program.KindExited, "forker:0")[0])
	if x.LikelyCause != program.CauseOperatorStop {
		t.Errorf("exited: %+v", x)
	}
	if len(h.matching(program.KindBackoff, "forker:0")) != 0 {
		t.Error("a stop must not announce a backoff")
	}
}

func TestThirtyInstancesCrashLoopingAtOnce(t *testing.T) {
	h := newHarness(t)
	s := spec("looper", "/bin/sh", "-c", "exit 1")
	s.Instances = 30
	s.BackoffInitial, s.BackoffMax = time.Millisecond, 5*time.Millisecond
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("every instance to crash 5 times", func() bool {
		for k := 0; k < 30; k++ {
			if h.status(program.InstanceID("looper", k)).Restarts.Crash < 5 {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.mgr.Remove(ctx, "looper"); err != nil {
		t.Fatal(err)
	}
	spawned := map[int]string{}
	for _, e := range h.matching(program.KindSpawned, "") {
		spawned[data[program.Spawned](e).PID] = e.ID
	}
	exits := map[int]int{}
	for _, e := range h.matching(program.KindExited, "") {
		x := data[program.Exited](e)
		if spawned[x.PID] != e.ID {
			t.Errorf("exit of pid %d for %s, which it never spawned", x.PID, e.ID)
		}
		exits[x.PID]++
	}
	for pid, id := range spawned {
		if exits[pid] != 1 {
			t.Errorf("%s pid %d: %d exited events, want 1", id, pid, exits[pid])
		}
	}
	if kids := children(); len(kids) != 0 {
		t.Errorf("children left after remove: %v", kids)
	}
}

func TestCleanExitPoliciesAndStopStart(t *testing.T) {
	h := newHarness(t)
	s := spec("once", "/bin/sh", "-c", "exit 0")
	s.Restart = program.RestartOnFailure
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("exited", func() bool { return h.status("once:0").State == program.StateExited })
	if n := len(h.matching(program.KindSpawned, "once:0")); n != 1 {
		t.Errorf("on-failure restarted a clean exit: %d spawns", n)
	}
	if _, err := h.mgr.Start(context.Background(), "once", program.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("second run", func() bool { return len(h.matching(program.KindExited, "once:0")) == 2 })
	if _, err := h.mgr.Start(context.Background(), "nope", program.ActOptions{}); err == nil {
		t.Error("start of an unknown program succeeded")
	}
}

func TestApplyRescalesWithoutTouchingOthers(t *testing.T) {
	h := newHarness(t)
	s := spec("pool", "/bin/sh", "-c", "exec sleep 1000")
	s.Instances = 2
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("both running", func() bool {
		return h.status("pool:0").State == program.StateRunning && h.status("pool:1").State == program.StateRunning
	})
	first := pidOf(h.status("pool:0"))
	s3 := s
	s3.Instances = 3
	other := spec("extra", "/bin/sh", "-c", "exec sleep 1000")
	d, err := h.mgr.Apply(context.Background(), []program.Spec{s3, other})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Added) != 1 || len(d.Changed) != 1 {
		t.Errorf("diff %+v", d)
	}
	h.waitFor("pool:2 running", func() bool { return h.status("pool:2").State == program.StateRunning })
	if pidOf(h.status("pool:0")) != first {
		t.Error("rescaling restarted an untouched instance")
	}
	if got := h.mgr.IDs(); len(got) != 4 {
		t.Errorf("ids %v", got)
	}
	d, err = h.mgr.Apply(context.Background(), []program.Spec{other})
	if err != nil || len(d.Removed) != 1 || len(d.Unchanged) != 1 {
		t.Fatalf("diff %+v err %v", d, err)
	}
	if alive(first) {
		t.Error("a removed program's run survived")
	}
}

// children lists this process's live or zombie children.
func children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
	}
	return pids
}
