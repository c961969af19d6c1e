//go:build vmtest

package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/statedir"
)

// `systemctl start tend` returns once tend has said READY=1, which it says
// once the fleet's initial start is done: at that moment the unit is
// active and every run is running (a fleet of 40, so the start takes a
// while). `systemctl status tend` shows tend's STATUS= counts.
func TestUnitStartWaitsForReady(t *testing.T) {
	const n = 40
	startFleet(t, configHead+sleeper("worker", n))

	// Right as systemctl start returns: active, and every run running.
	if out, err := run("systemctl", "is-active", unitName); strings.TrimSpace(out) != "active" {
		t.Fatalf("systemctl is-active after start = %q (%v)", strings.TrimSpace(out), err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(tend(t, "status", "worker", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, st := range list {
		if str(st, "state") == "running" && num(st, "pid") > 0 {
			running++
		} else {
			t.Logf("%s when systemctl start returned: state %s (%s)", str(st, "id"), str(st, "state"), str(st, "why"))
		}
	}
	if running != n {
		t.Errorf("%d of %d instances running when systemctl start returned", running, n)
	}

	// STATUS=: the counts, in systemctl show and in systemctl status.
	want := fmt.Sprintf("%d running, 0 backoff, 0 fatal", n)
	waitFor(t, 30*time.Second, "StatusText "+want, func() (bool, string) {
		text := unitProp(t, "StatusText")
		return text == want, text
	})
	if out, _ := run("systemctl", "status", unitName, "--no-pager", "-n", "0"); !strings.Contains(out, `Status: "`+want+`"`) {
		t.Errorf("systemctl status does not show Status: %q:\n%s", want, out)
	}
}

// Each run is in a group of its own in the scope tend has systemd make
// for its runs (Delegate=yes, beside tend.service, in its slice), tend
// itself alone in its unit's cgroup, which enables no controller (so that
// systemd can always start tend there again), and a process that leaves
// its session stays in its run's group.
func TestUnitRunsInDelegatedSubtree(t *testing.T) {
	startFleet(t, configHead+sleeper("worker", 3)+helper(t, "leaver", "leaver", nil))
	p := unitProps(t, "Delegate", "ControlGroup", "MainPID")
	if p["Delegate"] != "yes" {
		t.Fatalf("Delegate = %q, want yes", p["Delegate"])
	}
	unit := p["ControlGroup"]
	daemonPID, _ := strconv.Atoi(p["MainPID"])
	if g := cgroupOf(t, daemonPID); g != unit {
		t.Errorf("tend (pid %d) is in %s, want its unit's own %s", daemonPID, g, unit)
	}
	if c := cgFile(t, unit, "cgroup.subtree_control"); c != "" {
		t.Errorf("%s enables %q for groups below it: systemd could not start tend there again while they hold runs", unit, c)
	}
	sc := propsOf(t, scopeName, "ActiveState", "Delegate", "ControlGroup", "Slice", "Before", "OOMPolicy", "TasksMax")
	if sc["ActiveState"] != "active" || sc["Delegate"] != "yes" || sc["Slice"] != path.Base(sliceGroup) ||
		!slices.Contains(strings.Fields(sc["Before"]), unitName) || sc["OOMPolicy"] != "continue" || sc["TasksMax"] != "infinity" {
		t.Errorf("%s: %v; want active, Delegate=yes, in tend.service's slice, Before=tend.service, OOMPolicy=continue, TasksMax=infinity", scopeName, sc)
	}
	scope := sc["ControlGroup"]
	if scope != path.Join(sliceGroup, scopeName) {
		t.Errorf("%s's cgroup is %q, want %s", scopeName, scope, path.Join(sliceGroup, scopeName))
	}
	tree := path.Join(scope, "tend-"+statedir.ID(stateDir))
	// The holder keeps the scope while no run does: one process, in the
	// scope's hold leaf, so that the scope's own group holds none.
	if procs := cgProcs(path.Join(scope, "hold")); len(procs) != 1 {
		t.Errorf("the scope's hold leaf holds %v, want one holder", procs)
	} else if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", procs[0])); string(cmd) != "tend\x00cgroup-hold\x00" {
		t.Errorf("the holder %d runs %q, want tend cgroup-hold", procs[0], cmd)
	} else {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", procs[0]))
		for line := range strings.SplitSeq(string(st), "\n") {
			if strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "RssAnon:") {
				t.Logf("the scope's holder %d: %s", procs[0], strings.Join(strings.Fields(line), " "))
			}
		}
	}
	if procs := cgFile(t, scope, "cgroup.procs"); procs != "" {
		t.Errorf("the scope's own group holds %q", procs)
	}
	seen := map[string]string{}
	for _, id := range []string{"worker:0", "worker:1", "worker:2", "leaver:0"} {
		st := waitRunning(t, id)
		if str(st, "tracking") != "cgroup" {
			t.Errorf("%s tracking = %q, want cgroup", id, str(st, "tracking"))
		}
		g := cgroupOf(t, int(num(st, "pid")))
		name, k, _ := strings.Cut(id, ":")
		switch {
		case g != path.Join(tree, name+"-"+k):
			t.Errorf("%s runs in %s, want %s", id, g, path.Join(tree, name+"-"+k))
		case seen[g] != "":
			t.Errorf("%s and %s share the group %s", id, seen[g], g)
		}
		seen[g] = id
		// The controllers reach the runs' groups (Delegate=yes, then tend).
		if c := strings.Fields(cgFile(t, g, "cgroup.controllers")); !slices.Contains(c, "memory") {
			t.Errorf("%s's group %s has controllers %v, no memory", id, g, c)
		}
	}

	// The leaver's child left its session and process group, not its cgroup.
	st := status(t, "leaver:0")
	leader := int(num(st, "pid"))
	g := cgroupOf(t, leader)
	var child int
	waitFor(t, 30*time.Second, "the leaver's child in "+g, func() (bool, string) {
		procs := cgProcs(g)
		for _, p := range procs {
			if p != leader {
				child = p
			}
		}
		return len(procs) == 2 && child != 0, fmt.Sprintf("procs %v", procs)
	})
	sid, _ := unix.Getsid(child)
	if sid != child {
		t.Errorf("the leaver's child %d has session %d: it was to lead its own", child, sid)
	}
	listed := false
	waitFor(t, 30*time.Second, "leaver:0's status lists its child", func() (bool, string) {
		procs, _ := status(t, "leaver:0")["processes"].([]any)
		for _, p := range procs {
			pm, _ := p.(map[string]any)
			listed = listed || num(pm, "pid") == int64(child)
		}
		return listed, fmt.Sprintf("processes %v", procs)
	})
}

// `systemctl reload tend` applies a changed config, and refuses a broken
// one with tend's reason in the journal, the fleet untouched.
func TestUnitReload(t *testing.T) {
	config := configHead + sleeper("worker", 1)
	startFleet(t, config)
	daemon := mainPID(t)
	worker := num(waitRunning(t, "worker:0"), "pid")

	writeConfig(t, config+sleeper("extra", 1))
	mustRun(t, "systemctl", "reload", unitName)
	extra := num(waitRunning(t, "extra:0"), "pid")
	if got := num(status(t, "worker:0"), "pid"); got != worker {
		t.Errorf("worker:0 pid %d after the reload, was %d: an unchanged program was restarted", got, worker)
	}

	// A misspelled key, named in the journal by file, line and key.
	good := configHead + sleeper("worker", 1) + sleeper("extra", 1)
	broken := good + "stop_grase = \"1s\"\n"
	reason := fmt.Sprintf("%s:%d: program.extra.stop_grase: unknown key", configPath, strings.Count(good, "\n")+1)
	writeConfig(t, broken)
	since := time.Now()
	out, err := run("systemctl", "reload", unitName)
	if err == nil {
		t.Fatalf("systemctl reload with a broken config succeeded:\n%s", out)
	}
	waitFor(t, 30*time.Second, "tend's reason in the journal", func() (bool, string) {
		j := journal(t, since)
		return strings.Contains(j, reason), tail(j, 10)
	})
	if st, _ := run("systemctl", "status", unitName, "--no-pager", "-n", "20"); !strings.Contains(st, "stop_grase") {
		t.Errorf("systemctl status does not show why the reload failed:\n%s", st)
	}
	p := unitProps(t, "ActiveState", "MainPID")
	if p["ActiveState"] != "active" || p["MainPID"] != strconv.Itoa(daemon) {
		t.Errorf("after the refused reload: %v, want active with MainPID %d", p, daemon)
	}
	for id, pid := range map[string]int64{"worker:0": worker, "extra:0": extra} {
		if st := status(t, id); num(st, "pid") != pid || str(st, "state") != "running" {
			t.Errorf("%s after the refused reload: state %s pid %d, want running pid %d", id, str(st, "state"), num(st, "pid"), pid)
		}
	}
}

// tend feeds the unit's watchdog; a tend that stops answering is killed
// and started again by systemd. WatchdogSec is shortened (the shipped 30s)
// so that several periods pass in seconds.
func TestUnitWatchdog(t *testing.T) {
	const period = 4 * time.Second
	startFleet(t, configHead+sleeper("worker", 1), "[Service]\nWatchdogSec=4s\nTimeoutAbortSec=5s\n")
	if w := unitProp(t, "WatchdogUSec"); w != "4s" {
		t.Fatalf("WatchdogUSec = %q, want 4s from the drop-in", w)
	}
	daemon := mainPID(t)
	runs := runsOf(t, "worker:0")
	// WatchdogTimestamp is when systemd last heard WATCHDOG=1.
	var first, last int64
	pings := map[int64]bool{}
	deadline := time.Now().Add(4 * period)
	for time.Now().Before(deadline) {
		p := unitProps(t, "WatchdogTimestampMonotonic", "ActiveState", "MainPID", "NRestarts")
		if p["ActiveState"] != "active" || p["MainPID"] != strconv.Itoa(daemon) || p["NRestarts"] != "0" {
			t.Fatalf("within 4 watchdog periods: %v, want active, MainPID %d, no restart", p, daemon)
		}
		last, _ = strconv.ParseInt(p["WatchdogTimestampMonotonic"], 10, 64)
		if first == 0 {
			first = last
		}
		pings[last] = true
		time.Sleep(500 * time.Millisecond)
	}
	fed := time.Duration(last-first) * time.Microsecond
	t.Logf("%d distinct watchdog pings seen in %v, the last %v after the first", len(pings), 4*period, fed)
	if first == 0 || fed < 2*period {
		t.Errorf("the pings seen span %v of 4 watchdog periods (%v each): tend is not feeding the watchdog", fed, period)
	}

	// A stopped tend sends nothing: systemd's watchdog ends it and starts
	// another, which adopts the run.
	seq := lastSeq(t)
	since := time.Now()
	if err := syscall.Kill(daemon, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "systemd restarts the silent tend", func() (bool, string) {
		p := unitProps(t, "ActiveState", "MainPID", "NRestarts")
		return p["ActiveState"] == "active" && p["MainPID"] != "0" && p["MainPID"] != strconv.Itoa(daemon), fmt.Sprint(p)
	})
	if j := journal(t, since); !strings.Contains(j, "Watchdog timeout") {
		t.Errorf("the journal does not say the watchdog fired:\n%s", tail(j, 15))
	}
	checkKept(t, runs, seq, "the watchdog's restart of tend")
}
