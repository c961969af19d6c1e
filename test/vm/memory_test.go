//go:build vmtest

package vm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A program past its memory_max is OOM-killed by the kernel, and tend
// counts that as a memory end (restart accounting row 2: likely_cause
// oom_kill, crash_count unchanged, rss_backoff), not a crash.
func TestMemoryMaxOOMKill(t *testing.T) {
	trigger := filepath.Join(triggerDir, "hog")
	startFleet(t, configHead+helper(t, "hog", "alloc", map[string]string{"TEND_VM_TRIGGER": trigger},
		`memory_max = "64MiB"`, `rss_backoff = "1s"`))

	st := waitRunning(t, "hog:0")
	pid := int(num(st, "pid"))
	group := cgroupOf(t, pid)
	if got := cgFile(t, group, "memory.max"); got != strconv.Itoa(64*mib) {
		t.Fatalf("memory.max of %s = %s, want %d (memory_max 64MiB)", group, got, 64*mib)
	}
	seq := lastSeq(t)
	touch(t, trigger) // now it allocates

	ex := waitEvent(t, seq, "exited", "hog:0", 2*time.Minute)
	t.Logf("exited: %v", ex)
	if c := str(ex, "likely_cause"); c != "oom_kill" {
		t.Errorf("exited likely_cause = %q, want oom_kill", c)
	}
	if s := str(ex, "signal"); s != "SIGKILL" {
		t.Errorf("exited signal = %q, want SIGKILL (the OOM killer's)", s)
	}
	if n := num(ex, "crash_count"); n != 0 {
		t.Errorf("exited crash_count = %d, want 0 (an OOM kill is not a crash)", n)
	}
	if num(ex, "pid") != int64(pid) {
		t.Errorf("exited pid = %d, want the run's %d", num(ex, "pid"), pid)
	}
	// The kernel says it was its OOM killer, in this group.
	if k := mustRun(t, "dmesg"); !strings.Contains(k, fmt.Sprintf("Killed process %d ", pid)) {
		t.Errorf("the kernel log has no OOM kill of pid %d:\n%s", pid, tail(k, 15))
	}

	bo := waitEvent(t, seq, "backoff", "hog:0", time.Minute)
	if r := str(bo, "reason"); r != "rss_watchdog" {
		t.Errorf("backoff reason = %q, want rss_watchdog (row 2's backoff)", r)
	}
	if n := num(bo, "crash_count"); n != 0 {
		t.Errorf("backoff crash_count = %d, want 0", n)
	}

	// After rss_backoff the program runs again, in a fresh group.
	sp := waitEvent(t, ex.seq(), "spawned", "hog:0", time.Minute)
	if num(sp, "run") != 2 {
		t.Errorf("the run after the OOM kill is run %d, want 2", num(sp, "run"))
	}
	st = waitRunning(t, "hog:0")
	if n := num(st, "crash_count"); n != 0 {
		t.Errorf("status crash_count = %d, want 0", n)
	}
	restarts, _ := st["restarts"].(map[string]any)
	if num(restarts, "crash") != 0 || num(restarts, "rss_watchdog") != 1 {
		t.Errorf("status restarts = %v, want rss_watchdog 1 and crash 0", restarts)
	}
	last, _ := st["last_exit"].(map[string]any)
	if c := str(last, "likely_cause"); c != "oom_kill" {
		t.Errorf("status last_exit = %v, want likely_cause oom_kill", last)
	}
	// The OOM kill counts in the runs' scope too (memory.events is
	// hierarchical): its OOMPolicy=continue leaves it to tend.
	if q := propsOf(t, scopeName, "ActiveState", "Result"); q["ActiveState"] != "active" {
		t.Errorf("%s after a run's OOM kill: %v, want still active", scopeName, q)
	}
}

// max_rss is compared with the group's memory.current, and rss_bytes is
// memory.current: a program whose memory is in a memfd it never maps (in
// no process's RSS, so a walk of its process tree would see a few MiB) is
// drained once memory.current passes max_rss.
func TestMaxRSSDrainsByMemoryCurrent(t *testing.T) {
	trigger := filepath.Join(triggerDir, "drain")
	startFleet(t, configHead+helper(t, "drain", "shmem", map[string]string{
		"TEND_VM_TRIGGER": trigger, "TEND_VM_SHMEM_MIB": "24", "TEND_VM_SHMEM_MORE_MIB": "96",
	}, `max_rss = "48MiB"`, `rss_backoff = "1s"`))

	st := waitRunning(t, "drain:0")
	pid := int(num(st, "pid"))
	group := cgroupOf(t, pid)
	waitFor(t, time.Minute, "the memfd's 24 MiB charged to "+group, func() (bool, string) {
		cur := cgInt(t, group, "memory.current")
		return cur >= 24*mib, fmt.Sprintf("memory.current %d", cur)
	})

	// rss_bytes is memory.current (a status may be a second old: poll),
	// which the processes' own RSS is far from.
	var procRSS int64
	waitFor(t, 30*time.Second, "rss_bytes = memory.current", func() (bool, string) {
		st = status(t, "drain:0")
		cur := cgInt(t, group, "memory.current")
		procRSS = 0
		procs, _ := st["processes"].([]any)
		for _, p := range procs {
			pm, _ := p.(map[string]any)
			procRSS += num(pm, "rss_bytes")
		}
		rss := num(st, "rss_bytes")
		diff := rss - cur
		return diff > -mib && diff < mib && str(st, "tracking") == "cgroup",
			fmt.Sprintf("rss_bytes %d, memory.current %d, tracking %q", rss, cur, str(st, "tracking"))
	})
	t.Logf("rss_bytes %d = memory.current; the processes' RSS adds up to %d", num(st, "rss_bytes"), procRSS)
	if procRSS >= 24*mib {
		t.Fatalf("the processes' RSS (%d) holds the memfd: the test cannot tell memory.current from a tree walk", procRSS)
	}

	seq := lastSeq(t)
	touch(t, trigger) // 96 MiB more: memory.current passes max_rss, the RSS does not
	var maxVmRSS int64
	var ex event
	waitFor(t, 2*time.Minute, "drain:0 drained for max_rss", func() (bool, string) {
		if r := vmRSS(pid); r > maxVmRSS {
			maxVmRSS = r
		}
		for _, e := range events(t, seq) {
			if e.kind() == "exited" && e.id() == "drain:0" {
				ex = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("VmRSS %d", maxVmRSS)
	})
	var exceeded event
	for _, e := range events(t, seq) {
		if e.kind() == "rss_exceeded" && e.id() == "drain:0" {
			exceeded = e
			break
		}
	}
	if exceeded == nil {
		t.Fatalf("no rss_exceeded event before the drain; exited: %v", ex)
	}
	t.Logf("rss_exceeded: %v; exited: %v; the run's largest VmRSS seen meanwhile: %d", exceeded, ex, maxVmRSS)
	if num(exceeded, "max_rss") != 48*mib || num(exceeded, "rss_bytes") <= 48*mib {
		t.Errorf("rss_exceeded = %v, want rss_bytes over max_rss %d", exceeded, 48*mib)
	}
	if maxVmRSS >= 48*mib {
		t.Errorf("the run's own RSS reached %d: this no longer shows that max_rss reads memory.current", maxVmRSS)
	}
	if c := str(ex, "likely_cause"); c != "rss_watchdog" {
		t.Errorf("exited likely_cause = %q, want rss_watchdog", c)
	}
	if n := num(ex, "crash_count"); n != 0 {
		t.Errorf("exited crash_count = %d, want 0", n)
	}
}

// vmRSS is a process's own resident memory (VmRSS), 0 once it is gone.
func vmRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
