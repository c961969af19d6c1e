//go:build vmtest

package vm

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runInfo is what identifies one run of an instance.
type runInfo struct {
	pid   int
	start string // /proc/PID/stat starttime, against pid reuse
	run   int64
}

// runsOf records the current run of each instance.
func runsOf(t *testing.T, ids ...string) map[string]runInfo {
	t.Helper()
	runs := map[string]runInfo{}
	for _, id := range ids {
		st := waitRunning(t, id)
		pid := int(num(st, "pid"))
		runs[id] = runInfo{pid: pid, start: procStart(pid), run: num(st, "run")}
	}
	return runs
}

// checkKept fails the test for each instance whose run is not the one
// recorded (dead, replaced, or a new run number), and for any spawned or
// exited event after seq.
func checkKept(t *testing.T, runs map[string]runInfo, seq int64, after string) {
	t.Helper()
	for id, r := range runs {
		if procStart(r.pid) != r.start {
			t.Errorf("%s: its run (pid %d) did not survive %s", id, r.pid, after)
			continue
		}
		st := status(t, id)
		if num(st, "pid") != int64(r.pid) || num(st, "run") != r.run || str(st, "state") != "running" {
			t.Errorf("%s after %s: state %s pid %d run %d, want running pid %d run %d (%s)",
				id, after, str(st, "state"), num(st, "pid"), num(st, "run"), r.pid, r.run, str(st, "why"))
		}
	}
	for _, e := range events(t, seq) {
		if e.kind() == "spawned" || e.kind() == "exited" {
			t.Errorf("after %s: %v", after, e)
		}
	}
}

// A tend SIGKILLed under systemd leaves its runs alive; systemd starts
// tend again, which adopts them: same pids, nothing restarted. This is
// what the unit's KillMode=process is for, and what the runs' scope makes
// possible with the memory controller on: the runs' groups, and the
// memory.max of each, are not below tend.service, and stay as they were.
func TestKilledTendAdoptsRuns(t *testing.T) {
	startFleet(t, configHead+sleeper("worker", 2)+helper(t, "leaver", "leaver", nil)+
		helper(t, "capped", "sleep", nil, `memory_max = "48MiB"`))
	p := unitProps(t, "MainPID", "NRestarts", "KillMode")
	scope := propsOf(t, scopeName, "InvocationID", "ControlGroup")
	old, _ := strconv.Atoi(p["MainPID"])
	runs := runsOf(t, "worker:0", "worker:1", "leaver:0", "capped:0")
	leaverGroup := cgroupOf(t, runs["leaver:0"].pid)
	capped := cgroupOf(t, runs["capped:0"].pid)
	if got := cgFile(t, capped, "memory.max"); got != strconv.Itoa(48*mib) {
		t.Fatalf("capped:0's memory.max = %s, want %d", got, 48*mib)
	}
	var child int
	waitFor(t, 30*time.Second, "the leaver's child", func() (bool, string) {
		for _, pid := range cgProcs(leaverGroup) {
			if pid != runs["leaver:0"].pid {
				child = pid
			}
		}
		return child != 0, ""
	})
	childStart := procStart(child)
	seq := lastSeq(t)

	since := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "systemd starts tend again", func() (bool, string) {
		q := unitProps(t, "ActiveState", "MainPID")
		return q["ActiveState"] == "active" && q["MainPID"] != "0" && q["MainPID"] != p["MainPID"], fmt.Sprint(q)
	})
	if n := mustAtoi(unitProp(t, "NRestarts")); n != mustAtoi(p["NRestarts"])+1 {
		t.Errorf("NRestarts %d, was %s: want one restart", n, p["NRestarts"])
	}
	if p["KillMode"] != "process" {
		t.Logf("the unit has KillMode=%s: systemd kills a crashed tend's runs with it (KillMode=process keeps them)", p["KillMode"])
	}
	if j := managerLines(journal(t, since)); strings.Contains(j, "219/CGROUP") || strings.Contains(j, "Failed to attach") {
		t.Errorf("systemd could not place the restarted tend at first:\n%s", tail(j, 20))
	}
	checkKept(t, runs, seq, "tend's SIGKILL")
	if procStart(child) != childStart {
		t.Errorf("the leaver's detached child %d did not survive tend's SIGKILL", child)
	}
	// The same scope, the same groups, the limit never lifted.
	if now := propsOf(t, scopeName, "InvocationID", "ControlGroup"); now["InvocationID"] != scope["InvocationID"] || now["ControlGroup"] != scope["ControlGroup"] {
		t.Errorf("%s is %v after tend's restart, was %v: want the same scope", scopeName, now, scope)
	}
	if g := cgroupOf(t, runs["capped:0"].pid); g != capped {
		t.Errorf("capped:0 is in %s after tend's restart, was in %s", g, capped)
	}
	if got := cgFile(t, capped, "memory.max"); got != strconv.Itoa(48*mib) {
		t.Errorf("capped:0's memory.max = %s after tend's restart, want %d", got, 48*mib)
	}
	adopted := false
	for _, e := range events(t, seq) {
		if e.kind() == "daemon" && str(e, "phase") == "adopted" {
			adopted = true
			if num(e, "count") != int64(len(runs)) {
				t.Errorf("adopted %d runs, want %d: %v", num(e, "count"), len(runs), e)
			}
		}
	}
	if !adopted {
		t.Errorf("no daemon adopted event after tend's restart")
	}
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// `tend upgrade` under systemd re-executes tend in place: the same
// MAINPID, no restart of the unit, every run kept, and the new binary
// feeds the watchdog. Skipped while tend has no upgrade verb.
func TestUpgradeKeepsMainPID(t *testing.T) {
	if out, err := run(tendBin, "upgrade", "--help"); err != nil || !strings.Contains(out, "upgrade") {
		t.Skip("tend has no upgrade verb")
	}
	startFleet(t, configHead+sleeper("worker", 2), "[Service]\nWatchdogSec=4s\n")
	props := []string{"MainPID", "NRestarts", "InvocationID", "ExecMainStartTimestampMonotonic"}
	before := unitProps(t, props...)
	runs := runsOf(t, "worker:0", "worker:1")
	seq := lastSeq(t)

	// A new binary in place, as a package manager puts it: a rename.
	next := filepath.Join(filepath.Dir(tendBin), ".tend.new")
	mustRun(t, "install", "-m", "0755", "/usr/local/lib/tend-vm/tend-next", next)
	if err := os.Rename(next, tendBin); err != nil {
		t.Fatal(err)
	}
	t.Logf("$ tend upgrade\n%s", tend(t, "upgrade"))

	after := unitProps(t, append(props, "ActiveState")...)
	for _, k := range props {
		if after[k] != before[k] {
			t.Errorf("%s changed across the upgrade: %s, was %s", k, after[k], before[k])
		}
	}
	pid := mustAtoi(before["MainPID"])
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if exe != tendBin {
		t.Errorf("tend (pid %d) runs %q, want the new %s", pid, exe, tendBin)
	}
	checkKept(t, runs, seq, "tend upgrade")
	upgraded := false
	for _, e := range events(t, seq) {
		if e.kind() == "daemon" && str(e, "phase") == "upgraded" {
			upgraded = true
			// The version is the build's, then "+" and its digest.
			if to, _, _ := strings.Cut(str(e, "to"), "+"); !strings.HasSuffix(to, "-vm-next") {
				t.Errorf("upgraded event %v: want to the -vm-next build", e)
			}
		}
	}
	if !upgraded {
		t.Errorf("no daemon upgraded event")
	}
	// Three watchdog periods later the re-executed tend is still the unit's.
	time.Sleep(12 * time.Second)
	if now := unitProps(t, append(props, "ActiveState")...); now["MainPID"] != before["MainPID"] || now["NRestarts"] != before["NRestarts"] || now["ActiveState"] != "active" {
		t.Errorf("3 watchdog periods after the upgrade: %v, want active, MainPID %s, NRestarts %s", now, before["MainPID"], before["NRestarts"])
	}
}

// `systemctl stop tend` stops the fleet through tend's own shutdown
// (stop_signal, stop_grace, then SIGKILL, by tend) within TimeoutStopSec:
// systemd has nothing left to kill, the unit's cgroup ends empty.
func TestUnitStopStopsFleet(t *testing.T) {
	startFleet(t, configHead+sleeper("worker", 2)+
		helper(t, "stubborn", "stubborn", nil, `stop_grace = "2s"`)+helper(t, "leaver", "leaver", nil))
	ids := []string{"worker:0", "worker:1", "stubborn:0", "leaver:0"}
	runsOf(t, ids...)
	p := unitProps(t, "ControlGroup", "MainPID", "TimeoutStopUSec")
	unit := p["ControlGroup"]
	scope := path.Join(sliceGroup, scopeName)
	var pids []int
	waitFor(t, 30*time.Second, "every process of the fleet in the unit's cgroup and the runs' scope", func() (bool, string) {
		pids = append(cgProcs(unit), cgProcs(scope)...)
		return len(pids) == 7, fmt.Sprintf("%v", pids) // tend, the scope's holder, 4 runs, the leaver's child
	})

	since := time.Now()
	mustRun(t, "systemctl", "stop", unitName)
	took := time.Since(since)
	t.Logf("systemctl stop took %v (TimeoutStopSec %s)", took.Round(time.Millisecond), p["TimeoutStopUSec"])

	q := unitProps(t, "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
	// ExecMainCode 1 is CLD_EXITED: tend exited by itself, with status 0.
	if q["ActiveState"] != "inactive" || q["Result"] != "success" || q["ExecMainCode"] != "1" || q["ExecMainStatus"] != "0" {
		t.Errorf("after systemctl stop: %v, want inactive, Result success, tend exited 0", q)
	}
	j := managerLines(journal(t, since))
	if !strings.Contains(j, "tend.service: Deactivated successfully.") {
		t.Errorf("systemd does not say tend.service was deactivated successfully:\n%s", tail(j, 20))
	}
	for _, bad := range []string{"Killing process", "timed out", "Failed with result", "Main process exited"} {
		if strings.Contains(j, bad) {
			t.Errorf("systemd had to step in (%q):\n%s", bad, tail(j, 20))
		}
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d of the fleet is still alive after systemctl stop", pid)
		}
	}
	if left := cgProcs(unit); len(left) > 0 {
		t.Errorf("the unit's cgroup %s still holds %v", unit, left)
	}
	scopeGone(t)

	// tend's own account: each run ended in its shutdown, then stopped.
	var stopping, stopped int64
	exited := map[string]event{}
	for _, e := range auditEvents(t) {
		switch {
		case e.kind() == "daemon" && str(e, "phase") == "stopping":
			stopping = e.seq()
		case e.kind() == "daemon" && str(e, "phase") == "stopped":
			stopped = e.seq()
		case e.kind() == "exited" && stopping > 0:
			exited[e.id()] = e
		}
	}
	if stopping == 0 || stopped < stopping {
		t.Fatalf("the audit log has no daemon stopping then stopped (stopping %d, stopped %d)", stopping, stopped)
	}
	for _, id := range ids {
		e, ok := exited[id]
		switch {
		case !ok:
			t.Errorf("%s has no exited event in tend's shutdown", id)
		case str(e, "likely_cause") != "operator_stop":
			t.Errorf("%s ended by %v, want operator_stop", id, e)
		case id == "stubborn:0" && str(e, "signal") != "SIGKILL":
			t.Errorf("stubborn:0 ignores SIGTERM and ended by %v: want tend's SIGKILL after stop_grace", e)
		}
	}
}

// scopeGone waits for the runs' scope to be gone: tend ended its holder
// once no run was left, and systemd removed the scope and its groups.
func scopeGone(t *testing.T) {
	t.Helper()
	waitFor(t, 30*time.Second, scopeName+" gone", func() (bool, string) {
		q := propsOf(t, scopeName, "LoadState", "ActiveState")
		_, err := os.Stat(filepath.Join(cgroupRoot, sliceGroup, scopeName))
		return q["ActiveState"] == "inactive" && errors.Is(err, os.ErrNotExist), fmt.Sprintf("%v, %v", q, err)
	})
}

// A clean `tend down` under systemd stops the fleet and leaves nothing:
// the unit inactive (not failed, not restarted), no scope, no group.
func TestTendDownLeavesNothing(t *testing.T) {
	startFleet(t, configHead+sleeper("worker", 2)+helper(t, "leaver", "leaver", nil))
	runs := runsOf(t, "worker:0", "worker:1", "leaver:0")
	unit := unitProp(t, "ControlGroup")
	t.Logf("$ tend down\n%s", tend(t, "down"))
	waitFor(t, 2*time.Minute, "tend.service inactive", func() (bool, string) {
		q := unitProps(t, "ActiveState", "Result", "NRestarts")
		return q["ActiveState"] == "inactive", fmt.Sprint(q)
	})
	if q := unitProps(t, "Result", "NRestarts", "ExecMainStatus"); q["Result"] != "success" || q["NRestarts"] != "0" || q["ExecMainStatus"] != "0" {
		t.Errorf("after tend down: %v, want Result success, no restart, tend exited 0", q)
	}
	for id, r := range runs {
		if alive(r.pid) {
			t.Errorf("%s (pid %d) outlived tend down", id, r.pid)
		}
	}
	scopeGone(t)
	if ents, err := os.ReadDir(filepath.Join(cgroupRoot, unit)); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				t.Errorf("tend down left the group %s/%s", unit, e.Name())
			}
		}
	}
}

// At shutdown systemd stops every unit in one transaction (each unit
// conflicts with shutdown.target); the runs' scope is ordered
// Before=tend.service, so its stop waits for tend's own shutdown of the
// fleet instead of signalling the runs beside it. The same transaction
// without a shutdown: a target that conflicts with both units. (One
// systemctl stop of both does not do: it asks for each in turn.) The runs'
// stop_signal is SIGINT, so that tend's stop and systemd's SIGTERM tell
// apart.
func TestScopeStopsAfterTend(t *testing.T) {
	startFleet(t, configHead+sleeper("worker", 2)+"stop_signal = \"SIGINT\"\n")
	runs := runsOf(t, "worker:0", "worker:1")
	halt := "/etc/systemd/system/tend-vm-halt.target"
	// After= them too, so that its start (and systemctl start) waits for
	// both stops.
	both := unitName + " " + scopeName
	if err := os.WriteFile(halt, []byte("[Unit]\nDescription=stops tend and its runs' scope in one transaction\nConflicts="+both+"\nAfter="+both+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = run("systemctl", "stop", "tend-vm-halt.target")
		_ = os.Remove(halt)
		_, _ = run("systemctl", "daemon-reload")
	})
	mustRun(t, "systemctl", "daemon-reload")
	mustRun(t, "systemctl", "start", "tend-vm-halt.target")
	for id, r := range runs {
		if alive(r.pid) {
			t.Errorf("%s (pid %d) outlived the stop", id, r.pid)
		}
	}
	exited := map[string]event{}
	for _, e := range auditEvents(t) {
		if e.kind() == "exited" {
			exited[e.id()] = e
		}
	}
	for id := range runs {
		if e := exited[id]; str(e, "likely_cause") != "operator_stop" || str(e, "signal") != "SIGINT" {
			t.Errorf("%s ended by %v: want tend's stop (operator_stop, its stop_signal SIGINT), not systemd's SIGTERM", id, e)
		}
	}
	if a := unitProp(t, "ActiveState"); a != "inactive" {
		t.Errorf("tend.service is %s after the stop", a)
	}
	scopeGone(t)
}
