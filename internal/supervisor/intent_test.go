package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A second manager started on the intent record a first one left (as the
// daemon after a crash) restores each instance as it was: a stopped one
// stays stopped, a fatal one fatal with its crash_count, one in backoff
// keeps its deadline and then starts, a scale stands, and counters count
// on. A program whose spec changed keeps its counters and its operator
// stop, and is started where the policy had given up; records of
// instances no longer there are left unclaimed.
func TestIntentRecordRestoresEachInstance(t *testing.T) {
	dir := testutil.StateDir(t)
	keep := kept.OpenIntents(dir, nil)
	defer keep.Close()
	h := newHarnessWith(t, func(d *Deps) { d.Intents = keep })
	ctx := context.Background()

	halt := spec("halt", "/bin/sh", "-c", "exec sleep 1000")
	fatal := spec("fatal", "/bin/sh", "-c", "exit 1")
	fatal.HardMaxCrashes = 2
	slow := spec("slow", "/bin/sh", "-c", "exit 1")
	slow.BackoffInitial, slow.BackoffMax, slow.BackoffJitter = 3*time.Second, 3*time.Second, 0
	pool := spec("pool", "/bin/sh", "-c", "exec sleep 1000")
	changed := spec("changed", "/bin/sh", "-c", "exit 1")
	changed.HardMaxCrashes = 1
	gone := spec("gone", "/bin/sh", "-c", "exec sleep 1000")
	if _, errs := h.mgr.AddAll([]program.Spec{halt, fatal, slow, pool, changed, gone}); errs[0] != nil {
		t.Fatal(errs)
	}
	// Its first run first: a stop that comes before it (a loaded machine)
	// leaves run 0, and the record's run count is what this checks.
	h.waitFor("halt running", func() bool { return h.status("halt:0").State == program.StateRunning })
	if _, err := h.mgr.Stop(ctx, "halt", program.ActOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.Scale(ctx, "pool", 3); err != nil {
		t.Fatal(err)
	}
	h.waitFor("fatal, changed fatal, slow backing off", func() bool {
		return h.status("fatal:0").State == program.StateFatal && h.status("changed:0").State == program.StateFatal &&
			h.status("slow:0").State == program.StateBackoff
	})
	slowBefore := h.status("slow:0")
	keep.Freeze() // the daemon dies here: nothing after counts
	loaded, err := kept.LoadIntents(dir, time.Now())
	if err != nil || loaded.Problem != "" {
		t.Fatalf("load: %v %q", err, loaded.Problem)
	}

	h2 := newHarness(t)
	h2.mgr.SetIntents(loaded.Records)
	changed.Command = []string{"/bin/sh", "-c", "exec sleep 1000"} // the config was fixed meanwhile
	halt2 := halt
	halt2.Command = []string{"/bin/sh", "-c", "exec sleep 999"}
	if _, errs := h2.mgr.AddAll([]program.Spec{halt2, fatal, slow, pool, changed}); errs[0] != nil {
		t.Fatal(errs)
	}
	if st := h2.status("halt:0"); st.State != program.StateStopped || st.Run != 1 {
		t.Errorf("halt: %+v", st)
	}
	if st := h2.status("fatal:0"); st.State != program.StateFatal || st.CrashCount != 2 || st.LastExit == nil {
		t.Errorf("fatal: %+v", st)
	}
	st := h2.status("slow:0")
	if st.State != program.StateBackoff || !st.NextStartAt.Equal(slowBefore.NextStartAt.Time) || st.CrashCount != slowBefore.CrashCount || st.Restarts != slowBefore.Restarts {
		t.Errorf("slow: %+v, before %+v", st, slowBefore)
	}
	if ids, _ := h2.mgr.Resolve("pool"); len(ids) != 3 {
		t.Errorf("pool after the scale to 3: %v", ids)
	}
	h2.waitFor("changed running again with its counters, slow started at its deadline", func() bool {
		c, s := h2.status("changed:0"), h2.status("slow:0")
		return c.State == program.StateRunning && c.CrashCount == 1 && s.Run > slowBefore.Run
	})
	if time.Now().Before(slowBefore.NextStartAt.Time) {
		t.Errorf("slow started before its backoff ended (%v)", slowBefore.NextStartAt)
	}
	left := h2.mgr.UnclaimedIntents()
	if _, ok := left["gone:0"]; !ok || len(left) != 1 {
		t.Errorf("unclaimed: %v", left)
	}
}
