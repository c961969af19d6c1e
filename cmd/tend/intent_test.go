package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// intentFleet is a fleet that puts an instance in each state the intent
// record keeps: halt (to be stopped; it ignores SIGTERM for a while, so a
// stop can be caught halfway), fatal (gives up at its second crash), slow
// (a crash loop with a 6 s backoff), worker (to be scaled) and calm.
const intentFleet = `[program.halt]
shell = "trap 'sleep 1; exit 0' TERM; while :; do sleep 0.1; done"
stop_grace = "30s"
[program.fatal]
shell = "exit 1"
backoff_initial = "10ms"
hard_max_crashes = 2
[program.slow]
shell = "exit 1"
backoff_initial = "6s"
backoff_max = "6s"
backoff_jitter = 0
[program.worker]
command = ["sleep", "1000"]
[program.calm]
command = ["sleep", "1001"]
`

// statusOf is the status of id, or the test fails.
func statusOf(t *testing.T, c *client.Client, id string) program.Status {
	t.Helper()
	st, err := c.Status(id)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return st
}

// TestADaemonKillChangesNothingDecided: SIGKILL the daemon and start it
// again, and every instance is as it was: halt, stopped by the operator
// while its run was still stopping, stays stopped (its run finished off,
// not restarted); fatal stays fatal with its crash_count; slow keeps its
// crash_count, restarts and backoff deadline, and starts at that deadline;
// worker keeps the scale of 3. A clean tend down and tend up then start
// afresh from the config.
func TestADaemonKillChangesNothingDecided(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	sock := filepath.Join(dir, ".tend", "tend.sock")
	write(t, conf, intentFleet)
	c := client.New(sock)

	up := startUp(t, tend, conf)
	waitRunning(t, c, "halt:0", "worker:0", "calm:0")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "scale", "worker", "3"); code != 0 {
		t.Fatalf("scale: %d %s%s", code, out, errOut)
	}
	waitRunning(t, c, "worker:1", "worker:2")
	testutil.Eventually(t, "fatal to give up and slow to back off after two crashes", func() bool {
		f, s := statusOf(t, c, "fatal:0"), statusOf(t, c, "slow:0")
		return f.State == program.StateFatal && s.State == program.StateBackoff && s.CrashCount == 2
	})
	haltRun := *statusOf(t, c, "halt:0").PID
	if code, out, errOut := tendRun(t, tend, "-c", conf, "stop", "--no-wait", "halt"); code != 0 {
		t.Fatalf("stop: %d %s%s", code, out, errOut)
	}
	fatalBefore, slowBefore := statusOf(t, c, "fatal:0"), statusOf(t, c, "slow:0")
	runs := pids(t, c, "worker:0", "worker:1", "worker:2", "calm:0")
	runs["halt:0"] = haltRun
	seq := lastSeq(t, c)
	killUp(t, up, up.Process.Pid, runs) // halt's run is still stopping: it ignores SIGTERM for a second

	up = startUp(t, tend, conf)
	waitRunning(t, c, "worker:0", "worker:1", "worker:2", "calm:0")
	testutil.Eventually(t, "halt's run to be finished off", func() bool {
		return statusOf(t, c, "halt:0").State == program.StateStopped && !testutil.Alive(haltRun)
	})
	if st := statusOf(t, c, "fatal:0"); st.State != program.StateFatal || st.CrashCount != fatalBefore.CrashCount || st.LastExit == nil {
		t.Errorf("fatal after the kill: %+v", st)
	}
	st := statusOf(t, c, "slow:0")
	if st.State != program.StateBackoff || !st.NextStartAt.Equal(slowBefore.NextStartAt.Time) || st.CrashCount != 2 || st.Restarts != slowBefore.Restarts || st.Run != slowBefore.Run {
		t.Errorf("slow after the kill: %+v\nbefore: %+v", st, slowBefore)
	}
	if ids, err := c.Statuses("worker"); err != nil || len(ids) != 3 {
		t.Errorf("worker after the kill: %d instances, %v", len(ids), err)
	}
	for id, pid := range pids(t, c, "worker:0", "worker:1", "worker:2", "calm:0") {
		if runs[id] != pid {
			t.Errorf("%s: pid %d, %d before the kill", id, pid, runs[id])
		}
	}
	testutil.Eventually(t, "slow to start again at its deadline", func() bool { return statusOf(t, c, "slow:0").Run > slowBefore.Run })
	if time.Now().Before(slowBefore.NextStartAt.Time) {
		t.Errorf("slow started before its backoff ended at %v", slowBefore.NextStartAt)
	}
	evs, err := c.Events(seq)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == program.KindSpawned && (e.Program == "halt" || e.Program == "fatal") {
			t.Errorf("%s started again after the kill: %s", e.ID, e.JSON)
		}
	}
	if st := statusOf(t, c, "slow:0"); st.CrashCount < 2 {
		t.Errorf("slow's crash count started over: %+v", st)
	}

	// A clean stop, and the next start is afresh.
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	if _, err := os.Stat(filepath.Join(dir, ".tend", "intent.json")); !os.IsNotExist(err) {
		t.Errorf("intent.json after a clean stop: %v", err)
	}
	up = startUp(t, tend, conf)
	waitRunning(t, c, "halt:0", "worker:0", "calm:0")
	if ids, _ := c.Statuses("worker"); len(ids) != 1 {
		t.Errorf("worker after a clean restart: %d instances", len(ids))
	}
	if st := statusOf(t, c, "slow:0"); st.Run > 2 || st.CrashCount > 2 {
		t.Errorf("slow after a clean restart counts on: %+v", st)
	}
	downAndGone(t, c, up, nil)
}

// lastSeq is the seq of the daemon's latest event.
func lastSeq(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	evs, err := c.Events(0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v", err)
	}
	return evs[len(evs)-1].Seq
}

// TestAnIntentRecordFromAnotherConfig: the config changed while no daemon
// ran. The records of a program gone are ignored and dropped from the
// file; a new program starts; a program whose spec changed keeps its
// operator's stop and its counters, and one the policy gave up on starts
// under its new spec. A damaged record is set aside and the fleet starts
// from the config, with one line naming the file.
func TestAnIntentRecordFromAnotherConfig(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	c := client.New(filepath.Join(state, "tend.sock"))
	write(t, conf, `[program.halt]
command = ["sleep", "1000"]
[program.fatal]
shell = "exit 1"
backoff_initial = "10ms"
hard_max_crashes = 2
[program.gone]
command = ["sleep", "1001"]
`)
	up := startUp(t, tend, conf)
	waitRunning(t, c, "halt:0", "gone:0")
	for _, id := range []string{"halt", "gone"} {
		if code, _, errOut := tendRun(t, tend, "-c", conf, "stop", id); code != 0 {
			t.Fatalf("stop %s: %s", id, errOut)
		}
	}
	testutil.Eventually(t, "fatal to give up", func() bool { return statusOf(t, c, "fatal:0").State == program.StateFatal })
	killUp(t, up, up.Process.Pid, nil)

	write(t, conf, `[program.halt]
command = ["sleep", "999"]
[program.fatal]
command = ["sleep", "1002"]
[program.fresh]
command = ["sleep", "1003"]
`)
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "fatal:0", "fresh:0")
	if st := statusOf(t, c, "halt:0"); st.State != program.StateStopped {
		t.Errorf("halt, stopped before its spec changed: %+v", st)
	}
	if st := statusOf(t, c, "fatal:0"); st.CrashCount != 2 || st.LastExit == nil {
		t.Errorf("fatal, fixed: its counters are gone: %+v", st)
	}
	testutil.Eventually(t, "gone's record to leave intent.json", func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "intent.json"))
		return len(b) > 0 && !strings.Contains(string(b), `"gone`)
	})
	runs := pids(t, c, "fatal:0", "fresh:0")
	killUp(t, up, up.Process.Pid, runs)
	if strings.Contains(stderr(), "intent.json") {
		t.Errorf("a sound record was complained about:\n%s", stderr())
	}

	// Cut short inside their first record (as a disk that filled up could
	// leave them): nothing whole is left to recover, so the file is set
	// aside and the fleet is the config's. (Cut later, the records before
	// the cut are recovered: TestADamagedIntentJSONKeepsTheDecisions; a cut
	// at half the length fell before or after halt's stop by how far the
	// journal had been compacted, 1 run in 12.)
	for _, name := range []string{"intent.json", "intent.json.log"} {
		p := filepath.Join(state, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		write(t, p, string(b[:min(len(b), 10)]))
	}
	up, stderr = startUpLogged(t, tend, conf)
	waitRunning(t, c, "halt:0", "fatal:0", "fresh:0")
	var lines []string
	for _, l := range strings.Split(stderr(), "\n") {
		if strings.Contains(l, "intent.json") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], filepath.Join(state, "intent.json")) {
		t.Errorf("want one line naming intent.json, got:\n%s", stderr())
	}
	if m, _ := filepath.Glob(filepath.Join(state, "intent.json.corrupt-*")); len(m) != 1 {
		t.Errorf("set aside: %v", m)
	}
	downAndGone(t, c, up, runs)
}
