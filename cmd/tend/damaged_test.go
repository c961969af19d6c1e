package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// cut cuts the file at path as a fault would: to n bytes.
func cut(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(b[:min(n, len(b))]))
}

// killCmdline SIGKILLs the processes whose command line is cmd (one only
// this test starts).
func killCmdline(cmd string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && cmdline(pid) == cmd+" " {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// TestALostRunsJSONAdoptsFromCgroupsAndFIFOs (issue 28): the daemon is
// SIGKILLed and runs.json and its journal are damaged (runs.json cut
// inside its first record, the journal emptied): every record is lost. The next daemon finds
// each live run by its instance's cgroup, or without cgroups by the
// output FIFOs it holds, and adopts its leader (the shell, not the sleep
// it started): neither killed as the cgroup is made again nor started a
// second time beside it, and no exited event. One line says each.
func TestALostRunsJSONAdoptsFromCgroupsAndFIFOs(t *testing.T) {
	tend := tendBinary(t)
	becomeSubreaper(t)
	for _, tc := range []struct {
		name   string
		cgroup func(t *testing.T) string
		word   string
	}{
		{"cgroup", func(t *testing.T) string { return testutil.CgroupDir(t) }, "cgroup"},
		{"off", func(*testing.T) string { return "off" }, "output FIFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "tend.toml")
			state := filepath.Join(dir, ".tend")
			arg := strconv.Itoa(100100 + len(tc.name))
			script := "sleep " + arg + " & wait"
			write(t, conf, fmt.Sprintf("[daemon]\ncgroup = %q\n\n[program.w]\ncommand = [\"sh\", \"-c\", %q]\ninstances = 2\n", tc.cgroup(t), script))
			c := client.New(filepath.Join(state, "tend.sock"))
			t.Cleanup(func() { killCmdline("sleep " + arg) }) // what a run left, if it failed

			up := startUp(t, tend, conf)
			waitRunning(t, c, "w:0", "w:1")
			first := pids(t, c, "w:0", "w:1")
			testutil.Eventually(t, "runs.json to hold both runs", func() bool {
				b, _ := os.ReadFile(filepath.Join(state, "runs.json"))
				return strings.Contains(string(b), `"pid":`+strconv.Itoa(first["w:0"])) && strings.Contains(string(b), `"pid":`+strconv.Itoa(first["w:1"]))
			})
			killUp(t, up, up.Process.Pid, first)
			seq := len(auditEvents(t, state))
			cut(t, filepath.Join(state, "runs.json"), 5)
			write(t, filepath.Join(state, "runs.json.log"), "")

			up, stderr := startUpLogged(t, tend, conf)
			waitRunning(t, c, "w:0", "w:1")
			if got := pids(t, c, "w:0", "w:1"); got["w:0"] != first["w:0"] || got["w:1"] != first["w:1"] {
				t.Errorf("runs %v, before the kill %v: not adopted", got, first)
			}
			time.Sleep(500 * time.Millisecond) // what a second copy would take to start
			if n := countCmdline("sh -c " + script); n != 2 {
				t.Errorf("%d copies of the run, want 2", n)
			}
			for id, pid := range first {
				if !testutil.Alive(pid) {
					t.Errorf("%s (pid %d) was killed", id, pid)
				}
				if !strings.Contains(stderr(), "runs.json has no record of "+id+", but its "+tc.word) {
					t.Errorf("no line says how %s was found:\n%s", id, stderr())
				}
			}
			evs := auditEvents(t, state)[seq:]
			if ex := find(evs, program.KindExited, ""); len(ex) > 0 {
				t.Errorf("exited events after the restart:\n%s", dump(ex))
			}
			downAndGone(t, c, up, first)
		})
	}
}

// TestADamagedProgramsJSONKeepsItsPrograms (issue 28): programs.json is
// cut short after a SIGKILL, losing the program added over the API. The
// next daemon leaves its run alone, says so, and keeps the program by
// name; so the daemon after it (killed again) does not stop the run as
// no longer configured either, and tend doctor names it, until tend add
// gives the program back and its run is taken over.
func TestADamagedProgramsJSONKeepsItsPrograms(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n")
	c := client.New(filepath.Join(state, "tend.sock"))

	up := startUp(t, tend, conf)
	waitRunning(t, c, "base:0")
	body := map[string]any{"name": "viaapi", "command": []string{"sleep", "200071"}}
	if _, err := c.Add(body); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "viaapi:0")
	runs := pids(t, c, "base:0", "viaapi:0")

	killUp(t, up, up.Process.Pid, runs)
	cut(t, filepath.Join(state, "programs.json"), 3)
	for i, want := range []string{"were lost with the damaged", "was lost with a damaged"} {
		up, stderr := startUpLogged(t, tend, conf)
		waitRunning(t, c, "base:0")
		testutil.Eventually(t, "the line on programs.json", func() bool { return strings.Contains(stderr(), want) }, testutil.Explain(stderr))
		time.Sleep(time.Second) // what a stray gets before it is stopped
		if !testutil.Alive(runs["viaapi:0"]) {
			t.Fatalf("start %d: the run of the program lost with programs.json was stopped:\n%s", i+1, stderr())
		}
		if n := countCmdline("sleep 200071"); n != 1 {
			t.Errorf("start %d: %d copies of viaapi:0 running", i+1, n)
		}
		if got := keptNames(t, state); !slices.Contains(got, "viaapi") {
			t.Errorf("start %d: programs.json names %v", i+1, got)
		}
		rep, err := c.Doctor(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(rep.Advice, "\n"), "viaapi") {
			t.Errorf("start %d: tend doctor does not name viaapi: %q", i+1, rep.Advice)
		}
		if i == 0 {
			killUp(t, up, up.Process.Pid, runs)
			continue
		}
		// tend add gives the program back, and it takes its run over.
		if _, err := c.Add(body); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, c, "viaapi:0")
		if got := pids(t, c, "viaapi:0")["viaapi:0"]; got != runs["viaapi:0"] {
			t.Errorf("viaapi:0 is pid %d, its run was %d: not adopted", got, runs["viaapi:0"])
		}
		if n := countCmdline("sleep 200071"); n != 1 {
			t.Errorf("%d copies of viaapi:0 running", n)
		}
		downAndGone(t, c, up, runs)
	}
}

// TestADamagedIntentJSONKeepsTheDecisions (issue 28): intent.json is cut
// short after a SIGKILL; the next daemon restores every decision from
// intent.json.log (a stop, a scale), takes the runs over, and says so in
// one line.
func TestADamagedIntentJSONKeepsTheDecisions(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	write(t, conf, "[program.w]\ncommand = [\"sleep\", \"200081\"]\n")
	c := client.New(filepath.Join(state, "tend.sock"))

	up := startUp(t, tend, conf)
	waitRunning(t, c, "w:0")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "scale", "w", "3"); code != 0 {
		t.Fatalf("scale: %d %s%s", code, out, errOut)
	}
	waitRunning(t, c, "w:1", "w:2")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "stop", "w:1"); code != 0 {
		t.Fatalf("stop: %d %s%s", code, out, errOut)
	}
	runs := pids(t, c, "w:0", "w:2")
	testutil.Eventually(t, "intent.json to hold the stop", func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "intent.json"))
		return strings.Contains(string(b), `"id":"w:1"`) && strings.Contains(string(b), `"stopped":true`)
	})
	killUp(t, up, up.Process.Pid, runs)
	cut(t, filepath.Join(state, "intent.json"), 10)

	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "w:0", "w:2")
	testutil.Eventually(t, "the line on intent.json", func() bool { return strings.Contains(stderr(), "restored from intent.json.log") }, testutil.Explain(stderr))
	if ids, err := c.Statuses("w"); err != nil || len(ids) != 3 {
		t.Errorf("w after the kill: %d instances, %v", len(ids), err)
	}
	if st := statusOf(t, c, "w:1"); st.State != program.StateStopped {
		t.Errorf("w:1 after the kill: %+v", st)
	}
	for id, pid := range pids(t, c, "w:0", "w:2") {
		if runs[id] != pid {
			t.Errorf("%s: pid %d, %d before the kill", id, pid, runs[id])
		}
	}
	downAndGone(t, c, up, runs)
}

// TestAReloadStopIsNoCrashAfterAKill (issue 28): a reload replaces a
// program whose run takes two seconds to stop; the daemon is SIGKILLed
// during the stop. The next daemon counts the run's end as the restart
// tend made (operator_restart), not as a crash, and starts it afresh
// under the new config.
func TestAReloadStopIsNoCrashAfterAKill(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	prog := func(v string) string {
		return "[program.w]\nshell = \"trap 'sleep 2; exit 0' TERM; while :; do sleep 0.1; done\"\nstop_grace = \"30s\"\nenv = { V = \"" + v + "\" }\n"
	}
	write(t, conf, prog("1"))
	c := client.New(filepath.Join(state, "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "w:0")
	runs := pids(t, c, "w:0")

	write(t, conf, prog("2"))
	reload := tendStart(t, tend, "-c", conf, "reload")
	testutil.Eventually(t, "the reload to stop w:0", func() bool { return statusOf(t, c, "w:0").State == program.StateStopping })
	seq := lastSeq(t, c)
	killUp(t, up, up.Process.Pid, runs)
	reload.wait(t)

	up = startUp(t, tend, conf)
	testutil.Eventually(t, "w:0 to run afresh", func() bool {
		st, err := c.Status("w:0")
		return err == nil && st.State == program.StateRunning && st.PID != nil && *st.PID != runs["w:0"]
	}, testutil.Explain(eventsOf(c)))
	evs, err := c.Events(seq)
	if err != nil {
		t.Fatal(err)
	}
	ex := find(evs, program.KindExited, "w:0")
	if len(ex) != 1 {
		t.Fatalf("%d exited events for w:0 after the kill:\n%s", len(ex), dump(evs))
	}
	if e := ex[0].Data.(*program.Exited); e.LikelyCause != program.CauseOperatorRestart || e.CrashCount != 0 {
		t.Errorf("the end of the run the reload stopped: %s", ex[0].JSON)
	}
	if st := statusOf(t, c, "w:0"); st.CrashCount != 0 {
		t.Errorf("w:0 after the kill: %+v", st)
	}
	rep, err := c.Doctor(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Advice {
		if strings.Contains(a, "crash") {
			t.Errorf("tend doctor: %s", a)
		}
	}
	downAndGone(t, c, up, runs)
}

// TestStaleFIFOsAreRemoved (issue 28): output FIFOs no run uses are
// removed as the daemon starts (those of an instance that is gone) and
// once a run left by an earlier daemon and no longer configured has been
// stopped; those of the fleet's runs stay, and nothing that is not a FIFO
// is touched.
func TestStaleFIFOsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	fifo := filepath.Join(state, "fifo")
	fleet := func(n int) string {
		return fmt.Sprintf("[program.w]\ncommand = [\"sleep\", \"200091\"]\ninstances = %d\n", n)
	}
	write(t, conf, fleet(2))
	c := client.New(filepath.Join(state, "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "w:0", "w:1")
	runs := pids(t, c, "w:0", "w:1")
	killUp(t, up, up.Process.Pid, runs)

	for _, n := range []string{"gone-0.out", "gone-0.err", "old-3"} {
		if err := unix.Mkfifo(filepath.Join(fifo, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(fifo, "notes.txt"), "not a FIFO")
	write(t, conf, fleet(1))
	up = startUp(t, tend, conf)
	waitRunning(t, c, "w:0")
	testutil.Eventually(t, "the stale FIFOs to go", func() bool {
		names, _ := filepath.Glob(filepath.Join(fifo, "*"))
		for i := range names {
			names[i] = filepath.Base(names[i])
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"notes.txt", "w-0.err", "w-0.out"})
	}, testutil.Explain(func() string { names, _ := filepath.Glob(filepath.Join(fifo, "*")); return strings.Join(names, " ") }))
	if !testutil.Alive(runs["w:0"]) || pids(t, c, "w:0")["w:0"] != runs["w:0"] {
		t.Errorf("w:0 was not adopted")
	}
	downAndGone(t, c, up, runs)
}

// TestALostRunsJSONTerminalIsFoundByTheKeeper (issue 28): without cgroups
// a terminal agent's run holds no FIFO, but the keeper holds its master
// with its pid and start time: with runs.json and its journal lost, the
// next daemon adopts it from there rather than starting a second copy.
func TestALostRunsJSONTerminalIsFoundByTheKeeper(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	write(t, conf, "[daemon]\ncgroup = \"off\"\n\n[program.term]\ncommand = [\"sleep\", \"200111\"]\ntty = true\n")
	c := client.New(filepath.Join(state, "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "term:0")
	runs := pids(t, c, "term:0")
	keeper := keeperOf(t, dir)
	killUp(t, up, up.Process.Pid, runs)
	orphaned(t, keeper)
	cut(t, filepath.Join(state, "runs.json"), 5)
	write(t, filepath.Join(state, "runs.json.log"), "")

	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "term:0")
	if got := pids(t, c, "term:0"); got["term:0"] != runs["term:0"] {
		t.Errorf("term:0 is pid %d, its run was %d: not adopted\n%s", got["term:0"], runs["term:0"], stderr())
	}
	time.Sleep(500 * time.Millisecond) // what a second copy would take to start
	if n := countCmdline("sleep 200111"); n != 1 {
		t.Errorf("%d copies of term:0 running", n)
	}
	if !strings.Contains(stderr(), "runs.json has no record of term:0, but the keeper holds its terminal") {
		t.Errorf("no line says how term:0 was found:\n%s", stderr())
	}
	downAndGone(t, c, up, runs)
	testutil.Eventually(t, "the keeper to go", func() bool { return !testutil.Alive(keeper) })
}
