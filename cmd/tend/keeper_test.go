package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A keeper killed outright (docs/terminal.md#a-keeper-that-dies) is said
// at once (a stderr line, a keeper_replaced event, the metric, a tend
// doctor line) and replaced: a new keeper holds the tty run's master, so
// that a daemon SIGKILLed after that still leaves the run its terminal,
// and the next daemon adopts it with its screen and its input.
func TestKeeperThatDiesIsReplaced(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.echo]
shell = "printf 'hello screen\n'; while read -r l; do printf 'got %s\n' \"$l\"; done"
tty = true

[program.ticker]
shell = "i=0; while :; do i=$((i+1)); printf 'tick %d\n' $i; sleep 0.005; done"
tty = true
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "echo:0", "ticker:0")
	before := pids(t, c, "echo:0", "ticker:0")
	run := before["echo:0"]
	// Every tick the ticker writes is in its log, in order, once: what the
	// daemon reads goes on through the keeper's death.
	ticks := func() int {
		t.Helper()
		_, out, _ := tendRun(t, tend, "logs", "-c", conf, "ticker:0", "--raw", "-n", "100000")
		lines := strings.Split(out, "\r\n")
		lines = lines[:len(lines)-1] // what follows the last newline: "", or a line being written
		for i, line := range lines {
			if line != "tick "+strconv.Itoa(i+1) {
				t.Fatalf("line %d of the ticker's log is %q", i+1, line)
			}
		}
		return len(lines)
	}
	testutil.Eventually(t, "ticks before", func() bool { return ticks() > 20 })
	old := keeperOf(t, dir)
	testutil.Eventually(t, "the keeper to hold the run's master", func() bool { return holdsTerminalOf(old, run) })

	syscall.Kill(old, syscall.SIGKILL)
	var kp int
	testutil.Eventually(t, "a new keeper holding the run's master", func() bool {
		kp = recordedKeeper(dir)
		return kp > 0 && kp != old && holdsTerminalOf(kp, run)
	}, testutil.Explain(stderr))
	if !holdsTerminalOf(kp, before["ticker:0"]) {
		t.Errorf("the new keeper does not hold the ticker's master")
	}
	n := ticks()
	testutil.Eventually(t, "ticks after the keeper's death", func() bool { return ticks() > n+50 })
	if cmdline(kp) != "tend-keeper " {
		t.Errorf("the new keeper's command line is %q", cmdline(kp))
	}
	line := "keeper pid " + strconv.Itoa(old) + " died; keeper pid " + strconv.Itoa(kp) + " replaces it and holds 2 tty run(s)' terminals again"
	testutil.Eventually(t, "the stderr line", func() bool { return strings.Contains(stderr(), line) }, testutil.Explain(stderr))
	var replaced *program.DaemonPhase
	testutil.Eventually(t, "the keeper_replaced event", func() bool {
		evs, err := c.Events(0)
		for _, e := range evs {
			if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseKeeperReplaced {
				replaced = d
			}
		}
		return err == nil && replaced != nil
	})
	if replaced.PID != old || replaced.Keeper != kp || replaced.Count == nil || *replaced.Count != 2 || replaced.Error != "" {
		t.Errorf("keeper_replaced %+v", replaced)
	}
	if _, m := get(t, filepath.Join(dir, ".tend", "tend.sock"), "/metrics"); !strings.Contains(m, "\ntend_keeper_restarts_total 1\n") {
		t.Errorf("/metrics lacks tend_keeper_restarts_total 1")
	}
	if _, out, _ := tendRun(t, tend, "-c", conf, "doctor"); !strings.Contains(out, "the keeper that holds tty runs' terminals died 1 time(s) (last: pid "+strconv.Itoa(old)) {
		t.Errorf("tend doctor says nothing of the keeper:\n%s", out)
	}

	// The daemon killed outright now: the new keeper keeps the terminal.
	killUp(t, up, up.Process.Pid, before)
	orphaned(t, kp)
	up, stderr = startUpLogged(t, tend, conf)
	waitRunning(t, c, "echo:0", "ticker:0")
	if after := pids(t, c, "echo:0", "ticker:0"); after["echo:0"] != run || after["ticker:0"] != before["ticker:0"] {
		t.Fatalf("%v after, %v before: not adopted\n%s", after, before, stderr())
	}
	screen := func() string { _, out, _ := tendRun(t, tend, "-c", conf, "screen", "echo:0"); return out }
	testutil.Eventually(t, "the adopted screen", func() bool { return strings.Contains(screen(), "hello screen") }, testutil.Explain(screen))
	if code, out, errOut := tendRun(t, tend, "-c", conf, "send", "echo:0", "--enter", "ping"); code != 0 {
		t.Fatalf("tend send: %d %s%s", code, out, errOut)
	}
	testutil.Eventually(t, "the run's answer", func() bool { return strings.Contains(screen(), "got ping") }, testutil.Explain(screen))
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == program.KindExited {
			t.Errorf("the run ended: %+v", e)
		}
	}
	if got := recordedKeeper(dir); got != kp {
		t.Errorf("keeper %d after the daemon's kill, %d before", got, kp)
	}
	downAndGone(t, c, up, before)
	testutil.Eventually(t, "the keeper to go", func() bool { return !testutil.Alive(kp) })
}

// recordedKeeper is the keeper dir's daemon recorded (keeper.pid) if it is
// a live process serving the socket (its descriptor 3), else 0.
func recordedKeeper(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, ".tend", "keeper.pid"))
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3"); pid <= 0 || !strings.HasPrefix(l, "socket:") {
		return 0
	}
	return pid
}

// holdsTerminalOf says whether process pid holds the master of the
// terminal run's stdin is: a /dev/ptmx descriptor whose tty-index is the
// number of the run's /dev/pts/N.
func holdsTerminalOf(pid, run int) bool {
	slave, _ := os.Readlink("/proc/" + strconv.Itoa(run) + "/fd/0")
	n, ok := strings.CutPrefix(slave, "/dev/pts/")
	if !ok {
		return false
	}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	for _, fd := range fds {
		l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if l != "/dev/ptmx" && l != "/dev/pts/ptmx" {
			continue
		}
		info, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd.Name())
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "tty-index:"); ok && strings.TrimSpace(v) == n {
				return true
			}
		}
	}
	return false
}
