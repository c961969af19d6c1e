package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// installTend copies this test binary to dir/tend, a file of its own (the
// daemon re-executes the file at its path, which a test may replace), and
// returns its path.
func installTend(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tend")
	replaceTend(t, path, exe, "")
	return path
}

// replaceTend puts a copy of src, with extra appended (another build, as
// far as a digest can tell), at path: written aside, then renamed over
// it, as an installer does (the running binary cannot be written).
func replaceTend(t *testing.T, path, src, extra string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tmp := path + ".new"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.WriteString(extra)
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// beatMain is the test binary run as tend-beat: a notify client that
// sends WATCHDOG=1 every 10 ms, and, the moment its parent (the daemon)
// is another binary (an exec in place), STATUS=sent during the upgrade.
// It prints a line per heartbeat.
func beatMain() {
	conn, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tend-beat:", err)
		os.Exit(1)
	}
	first := exeInode(os.Getppid())
	sent := false
	for i := 0; ; i++ {
		msg := "WATCHDOG=1"
		if !sent && exeInode(os.Getppid()) != first {
			msg, sent = "STATUS=sent during the upgrade", true
		}
		if _, err := conn.Write([]byte(msg)); err != nil && !isTransient(err) {
			fmt.Fprintln(os.Stderr, "tend-beat:", err)
			os.Exit(1)
		}
		fmt.Println("beat", i)
		time.Sleep(10 * time.Millisecond)
	}
}

// exeInode is the inode of the binary pid runs.
func exeInode(pid int) uint64 {
	var st syscall.Stat_t
	syscall.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &st)
	return st.Ino
}

// upgradeFleet: beat (notify heartbeats, a 3 s watchdog: a race-built
// test binary exec'd twice, through the shim, can take a second to its
// first beat on a loaded machine), counter (a line
// every 5 ms), exiter (exits 3 the moment the daemon is another binary:
// during the exec, or just after), gated (exits 1 when its gate opens),
// stubborn (takes half a second to stop), calm.
func upgradeFleet(beat string, g gates) string {
	return fmt.Sprintf(`[daemon]
http = "127.0.0.1:0"
[program.beat]
command = [%q]
watchdog = "3s"
[program.counter]
shell = "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.005; done"
[program.exiter]
shell = "p=$PPID; x=$(stat -L -c %%i /proc/$p/exe); while [ \"$(stat -L -c %%i /proc/$p/exe)\" = \"$x\" ]; do :; done; exit 3"
restart = "never"
[program.gated]
shell = "while [ ! -e %s ]; do sleep 0.01; done; exit 1"
restart = "never"
[program.stubborn]
shell = "trap 'sleep 0.5; exit 0' TERM; while :; do sleep 0.01; done"
[program.calm]
command = ["sleep", "1000"]
instances = 2
`, beat, filepath.Join(string(g), "gated"))
}

// TestUpgradeKeepsEverything upgrades a real daemon with a fleet running:
// same daemon pid, same run pids, no exited or spawned for any of them,
// the output written across the upgrade all in the log, a notify message
// sent during the upgrade arrives (and the heartbeats keep the watchdog
// quiet), a run that exits during the exec and one that exits after are
// reported with their exact exit codes, the upgraded event says from and
// to, seq continues, and tend version says the new version.
func TestUpgradeKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	g := newGates(t)
	defer g.openAll("gated")
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, upgradeFleet(helperBinary(t, "tend-beat"), g))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	ids := []string{"beat:0", "counter:0", "exiter:0", "gated:0", "stubborn:0", "calm:0", "calm:1"}
	waitRunning(t, c, ids...)
	before := pids(t, c, ids...)
	_, vOut, _ := tendRun(t, tend, "version")
	from := strings.Fields(vOut)[1]
	seq := lastSeq(t, c)
	time.Sleep(300 * time.Millisecond) // a few hundred lines before

	replaceTend(t, tend, tend, "\n# the next build\n")
	if code, _, errOut := tendRun(t, tend, "-c", conf, "stop", "--no-wait", "stubborn"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade")
	if code != 0 {
		t.Fatalf("tend upgrade: %d %s%s\n%s", code, out, errOut, stderr())
	}
	_, vOut, _ = tendRun(t, tend, "version")
	to := strings.Fields(vOut)[1]
	if from == to || strings.TrimSpace(out) != "upgraded from "+from+" to "+to {
		t.Errorf("tend upgrade printed %q; versions %s, %s", out, from, to)
	}
	if h, err := c.Health(); err != nil || h != to {
		t.Errorf("the daemon's version after the upgrade: %q %v, want %s", h, err, to)
	}
	if h := tcpHealth(t, stderr()); h != to {
		t.Errorf("the TCP listener after the upgrade answers version %q, want %s", h, to)
	}
	g.open(t, "gated")
	testutil.Eventually(t, "exiter and gated to end", func() bool {
		e, g := statusOf(t, c, "exiter:0"), statusOf(t, c, "gated:0")
		return e.LastExit != nil && g.LastExit != nil
	})
	time.Sleep(300 * time.Millisecond) // a few hundred lines after

	if up.Process.Pid != daemonPID(t, dir) {
		t.Errorf("the daemon's pid changed: %d, now %d", up.Process.Pid, daemonPID(t, dir))
	}
	after := pids(t, c, "beat:0", "counter:0", "calm:0", "calm:1")
	for id, pid := range after {
		if before[id] != pid {
			t.Errorf("%s: pid %d before, %d after", id, before[id], pid)
		}
	}
	testutil.Eventually(t, "stubborn, stopping across the upgrade, to stop", func() bool {
		return statusOf(t, c, "stubborn:0").State == program.StateStopped
	})
	for id, want := range map[string]int{"exiter:0": 3, "gated:0": 1, "stubborn:0": 0} {
		st := statusOf(t, c, id)
		if st.LastExit.Code == nil || *st.LastExit.Code != want || st.LastExit.LikelyCause == program.CauseUnknown && want == 1 {
			t.Errorf("%s's exit after the upgrade: %+v, want code %d", id, st.LastExit, want)
		}
	}
	if st := statusOf(t, c, "beat:0"); st.StatusText != "sent during the upgrade" || st.Wedge != nil {
		t.Errorf("beat after the upgrade: status %q, wedge %+v", st.StatusText, st.Wedge)
	}
	evs, err := c.Events(seq)
	if err != nil {
		t.Fatal(err)
	}
	upgraded := 0
	next := seq + 1
	for _, e := range evs {
		if e.Seq != next {
			t.Errorf("seq %d after %d", e.Seq, next-1)
		}
		next = e.Seq + 1
		switch {
		case e.Kind == program.KindDaemon:
			d := e.Data.(*program.DaemonPhase)
			if d.Phase == program.PhaseUpgraded {
				upgraded++
				if d.From != from || d.To != to || d.PID != up.Process.Pid {
					t.Errorf("upgraded event: %s", e.JSON)
				}
			}
			if d.Phase == program.PhaseStarted || d.Phase == program.PhaseAdopted {
				t.Errorf("%s", e.JSON)
			}
		case e.Kind == program.KindSpawned, e.Kind == program.KindWedged,
			e.Kind == program.KindExited && e.Program != "exiter" && e.Program != "gated" && e.Program != "stubborn":
			t.Errorf("across the upgrade: %s", e.JSON)
		}
	}
	if upgraded != 1 {
		t.Errorf("%d upgraded events:\n%s", upgraded, dump(evs))
	}
	counterLog := filepath.Join(dir, ".tend", "logs", "counter-0.log")
	// The counter's lines from before, across and after the upgrade, a
	// hundred at least: a fast upgrade is over before it wrote that many.
	testutil.Eventually(t, "the counter to write 100 lines", func() bool {
		b, _ := os.ReadFile(counterLog)
		return bytes.Count(b, []byte(" | line ")) >= 100
	})
	checkLines(t, counterLog)
	downAndGone(t, c, up, after)
}

// tcpHealth asks GET /healthz on the TCP address tend up printed.
func tcpHealth(t *testing.T, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "dashboard and API on http://")
	if !ok {
		t.Fatalf("no TCP address in:\n%s", stderr)
	}
	addr, _, _ := strings.Cut(rest, " ")
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Version string }
	json.NewDecoder(resp.Body).Decode(&h)
	return h.Version
}

// daemonPID is the pid in the state dir's lock.
func daemonPID(t *testing.T, dir string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, ".tend", "tend.lock"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// checkLines checks that the log holds "line 1", "line 2", ... with no
// gap and no repeat, each a whole record.
func checkLines(t *testing.T, log string) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, text, _ := strings.Cut(rec, " | ")
		v, ok := strings.CutPrefix(text, "line ")
		if !ok {
			continue
		}
		k, err := strconv.Atoi(v)
		if err != nil || k != n+1 {
			t.Fatalf("after line %d: %q", n, rec)
		}
		n = k
	}
	if n < 100 {
		t.Errorf("only %d lines", n)
	}
}

// TestUpgradeToABrokenBinaryIsRefused: a file at the daemon's path that
// does not run is refused with the reason (exit 1), nothing stops, and the
// daemon serves on as it was; SIGUSR2 twice in a row runs one upgrade.
func TestUpgradeToABrokenBinaryIsRefused(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	good := installTend(t, t.TempDir()) // a tend at another path, to run the CLI while the daemon's is broken
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.calm]
command = ["sleep", "1000"]
[program.slow]
shell = "trap 'sleep 1.5; exit 0' TERM; while :; do sleep 0.05; done"
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "calm:0", "slow:0")
	before := pids(t, c, "calm:0")
	write(t, tend+".bad", "#!/bin/sh\necho broken >&2\nexit 1\n")
	os.Chmod(tend+".bad", 0o755)
	if err := os.Rename(tend+".bad", tend); err != nil { // the running binary cannot be written: replaced
		t.Fatal(err)
	}
	code, _, errOut := tendRun(t, good, "-c", conf, "upgrade")
	if code != 1 || !strings.Contains(errOut, "does not run") || !strings.Contains(errOut, "broken") {
		t.Errorf("upgrade to a broken binary: exit %d, %s", code, errOut)
	}
	if got := pids(t, c, "calm:0"); got["calm:0"] != before["calm:0"] {
		t.Errorf("calm's run changed")
	}
	if code, _, errOut := tendRun(t, good, "-c", conf, "restart", "calm"); code != 0 {
		t.Errorf("the daemon after a refused upgrade: %s", errOut)
	}

	// SIGUSR2 twice while the upgrade waits for a stop under way: one
	// upgrade.
	replaceTend(t, tend, good, "\n# the next build\n")
	stop := tendStart(t, good, "-c", conf, "stop", "slow") // its run takes 1.5 s to stop
	testutil.Eventually(t, "slow to be stopping", func() bool { return statusOf(t, c, "slow:0").State == program.StateStopping })
	seq := lastSeq(t, c)
	syscall.Kill(up.Process.Pid, syscall.SIGUSR2)
	testutil.Eventually(t, "the upgrade to begin", func() bool { return strings.Contains(stderr(), "upgrading from") })
	syscall.Kill(up.Process.Pid, syscall.SIGUSR2)
	if code := stop.wait(t); code != 0 {
		t.Errorf("the stop under way: exit %d %s", code, stop.stderr.String())
	}
	testutil.Eventually(t, "the upgraded event", func() bool {
		evs, err := c.EventsMatching(seq, client.EventFilter{Kinds: []string{program.KindDaemon}})
		return err == nil && len(evs) > 0
	})
	time.Sleep(500 * time.Millisecond) // a second upgrade, if there were one, would be done by now
	evs, err := c.EventsMatching(seq, client.EventFilter{Kinds: []string{program.KindDaemon}})
	if err != nil || len(evs) != 1 || evs[0].Data.(*program.DaemonPhase).Phase != program.PhaseUpgraded {
		t.Errorf("after SIGUSR2 twice: %v\n%s", err, dump(evs))
	}
	if st := statusOf(t, c, "slow:0"); st.State != program.StateStopped {
		t.Errorf("slow after the upgrade: %+v", st)
	}
	downAndGone(t, c, up, nil)
}

// TestUpgradeDuringARollingRestart: the upgrade waits for the step under
// way, the next steps are served by the new binary, and both end well.
func TestUpgradeDuringARollingRestart(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.pool]
shell = "trap 'sleep 0.3; exit 0' TERM; while :; do sleep 0.05; done"
instances = 4
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "pool:0", "pool:1", "pool:2", "pool:3")
	replaceTend(t, tend, tend, "\n# the next build\n")
	roll := tendStart(t, tend, "-c", conf, "restart", "pool", "--rolling")
	testutil.Eventually(t, "the roll to be under way", func() bool { return statusOf(t, c, "pool:0").Run == 2 })
	code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade")
	if code != 0 || !strings.HasPrefix(out, "upgraded from") {
		t.Fatalf("upgrade during a roll: %d %s%s\n%s", code, out, errOut, stderr())
	}
	if code := roll.wait(t); code != 0 {
		t.Fatalf("the roll: exit %d\n%s%s", code, roll.stdout.String(), roll.stderr.String())
	}
	for _, id := range []string{"pool:0", "pool:1", "pool:2", "pool:3"} {
		if st := statusOf(t, c, id); st.Run != 2 || st.State != program.StateRunning {
			t.Errorf("%s after the roll: run %d, %s", id, st.Run, st.State)
		}
	}
	downAndGone(t, c, up, nil)
}
