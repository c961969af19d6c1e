package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// Containment (docs/containment.md), against the real cgroup2 hierarchy where this
// machine has one (as root, a directory handed to tend as daemon.cgroup),
// and in the fallback without cgroups.

// cgroupProcs lists the processes in group dir.
func cgroupProcs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// withArgs lists the live processes whose command line is argv.
func withArgs(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == want && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// leaker starts, in each run, a setsid'd child and a double-forked one,
// then sleeps (or, with exit, ends after a moment).
func leaker(mark string, exit bool) string {
	tail := "exec sleep 100000"
	if exit {
		tail = "sleep 0.05; exit 1"
	}
	return fmt.Sprintf(`shell = "setsid sleep %s.1 & sh -c 'sleep %s.2 &'; %s"`, mark, mark, tail)
}

func escapees(mark string) []int {
	return append(withArgs("sleep", mark+".1"), withArgs("sleep", mark+".2")...)
}

func markFor(t *testing.T) string {
	return strconv.Itoa(10000 + int(uint32(os.Getpid()*31+len(t.Name())))%80000)
}

func TestCgroupARunIsEveryProcessItStarts(t *testing.T) {
	cg := testutil.CgroupDir(t)
	mark := markFor(t)
	dir := t.TempDir()
	c, stop := startDaemon(t, dir, fmt.Sprintf("[daemon]\ncgroup = %q\n[program.leak]\n%s\nstop_grace = \"2s\"\n", cg, leaker(mark, false)))
	group := filepath.Join(cg, "tend-"+statedir.ID(filepath.Join(dir, ".tend")), "leak-0")
	testutil.Eventually(t, "the run and its escapees", func() bool { return len(escapees(mark)) == 2 })
	members := cgroupProcs(group)
	for _, pid := range append(escapees(mark), pidOf(t, c, "leak:0")) {
		if !contains(members, pid) {
			t.Errorf("pid %d is not in the run's group %v", pid, members)
		}
	}
	if contains(members, os.Getpid()) {
		t.Error("the daemon is in its run's group")
	}
	if rep, err := c.Doctor(time.Hour); err != nil || rep.Tracking != program.TrackingCgroup {
		t.Errorf("doctor: %+v %v; want tracking cgroup", rep, err)
	}
	st, _ := c.Status("leak:0")
	if st.Tracking != program.TrackingCgroup || len(st.Processes) != 3 {
		t.Errorf("status tracking %q with %d processes, want cgroup and 3: %+v", st.Tracking, len(st.Processes), st.Processes)
	}

	// A restart leaves nothing of the old run.
	old := escapees(mark)
	if _, err := c.Restart("leak"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the new run's escapees", func() bool {
		now := escapees(mark)
		return len(now) == 2 && !contains(now, old[0]) && !contains(now, old[1])
	})
	for _, pid := range old {
		if !zombie(pid) {
			t.Errorf("the old run's pid %d survived the restart", pid)
		}
	}

	// So does a stop: nothing left, the group empty.
	if _, err := c.Stop("leak"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the stop", func() bool { st, _ := c.Status("leak:0"); return st.State == program.StateStopped })
	if testutil.Populated(group) || len(escapees(mark)) != 0 {
		t.Errorf("after stop: group populated %v, escapees %v", testutil.Populated(group), escapees(mark))
	}
	if _, err := c.Start("leak"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a run again", func() bool { return len(escapees(mark)) == 2 })
	stop()
	if ents, _ := os.ReadDir(cg); len(ents) > 0 {
		for _, e := range ents {
			if e.IsDir() && testutil.Populated(filepath.Join(cg, e.Name())) {
				t.Errorf("tend down left group %s populated", e.Name())
			}
		}
	}
	if n := escapees(mark); len(n) != 0 {
		t.Errorf("tend down left %v", n)
	}
}

func TestCgroupAHundredEndsOfALeakerLeaveNothing(t *testing.T) {
	cg := testutil.CgroupDir(t)
	mark := markFor(t)
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, fmt.Sprintf("[daemon]\ncgroup = %q\n[program.leak]\n%s\nbackoff_initial = \"0s\"\nbackoff_max = \"0s\"\nmax_crashes = 1000\n", cg, leaker(mark, true)))
	var st program.Status
	testutil.Eventually(t, "a hundred runs", func() bool { st, _ = c.Status("leak:0"); return st.Run >= 100 },
		testutil.Within(3*time.Minute), // a hundred runs take a while under -race
		testutil.Every(50*time.Millisecond), testutil.Explain(func() string { return fmt.Sprintf("only %d runs", st.Run) }))
	// Each run's leader exits on its own; its group is killed as it does.
	// Had any run left one behind, the stop of the last would not end it.
	if _, err := c.Stop("leak"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "no escapee of a hundred runs", func() bool { return len(escapees(mark)) == 0 })
}

func TestTreeModeALeakerLeavesNothingEither(t *testing.T) {
	// Without cgroups, an ended run's setsid'd and double-forked processes
	// reach tend as subreaper carrying the run's TEND_ID, and are ended.
	mark := markFor(t)
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, fmt.Sprintf("[daemon]\ncgroup = \"off\"\n[program.leak]\n%s\nbackoff_initial = \"0s\"\nbackoff_max = \"0s\"\nmax_crashes = 1000\n", leaker(mark, true)))
	testutil.Eventually(t, "fifty runs", func() bool { st, _ := c.Status("leak:0"); return st.Run >= 50 })
	if _, err := c.Stop("leak"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "no escapee of fifty runs", func() bool { return len(escapees(mark)) == 0 })
	st, _ := c.Status("leak:0")
	if st.Tracking == program.TrackingCgroup {
		t.Errorf("cgroup = \"off\" gave tracking %q", st.Tracking)
	}
	if rep, err := c.Doctor(time.Hour); err != nil || rep.Tracking != program.TrackingGroup || !strings.Contains(strings.Join(rep.Advice, "\n"), "not cgroups") {
		t.Errorf("doctor: %+v %v; want tracking group and advice on containment", rep, err)
	}
	evs, _ := c.Events(0)
	for _, e := range evs {
		if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseStarted {
			if d.Tracking != program.TrackingGroup || !strings.Contains(d.TrackingWhy, "off") {
				t.Errorf("daemon started says tracking %q (%q)", d.Tracking, d.TrackingWhy)
			}
		}
	}
}

func TestCgroupBadDirectoryIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tend.toml")
	os.WriteFile(path, []byte("[daemon]\ncgroup = \""+dir+"/not-a-cgroup\"\n[program.w]\ncommand = [\"true\"]\n"), 0o600)
	err := Run(t.Context(), Options{ConfigPath: path})
	if err == nil || !strings.HasPrefix(err.Error(), path+":2: daemon.cgroup: "+dir+"/not-a-cgroup is not inside a cgroup2 mount") || !isBadConfig(err) {
		t.Fatalf("Run: %v, want a config error at %s:2: daemon.cgroup", err, path)
	}
}

func TestMemoryMaxWithoutAMemoryControllerIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tend.toml")
	os.WriteFile(path, []byte("[daemon]\ncgroup = \"off\"\n[program.w]\ncommand = [\"true\"]\nmemory_max = \"1GiB\"\n"), 0o600)
	err := Run(t.Context(), Options{ConfigPath: path})
	want := path + `:5: program.w.memory_max: cannot be enforced here: runs get no cgroup (cgroup = "off")`
	if err == nil || err.Error() != want || !isBadConfig(err) {
		t.Fatalf("Run: %v, want a config error:\n%s", err, want)
	}
}

// A memory_max that cannot be enforced is refused at a reload (the fleet
// left as it was) and at tend add, as at start; one set in [defaults] is
// reported there, once.
func TestMemoryMaxRefusedAtReloadAndAdd(t *testing.T) {
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, "[daemon]\ncgroup = \"off\"\n[program.w]\ncommand = [\"sleep\", \"100041\"]\n")
	testutil.Eventually(t, "w:0 running", func() bool { st, err := c.Status("w:0"); return err == nil && st.State == program.StateRunning })
	path := filepath.Join(dir, "tend.toml")
	os.WriteFile(path, []byte("[daemon]\ncgroup = \"off\"\n[defaults]\nmemory_max = \"1GiB\"\n[program.w]\ncommand = [\"sleep\", \"100041\"]\n[program.v]\ncommand = [\"sleep\", \"100042\"]\n"), 0o600)
	_, err := c.Reload()
	if err == nil || !strings.Contains(err.Error(), path+`:4: defaults.memory_max: cannot be enforced here: runs get no cgroup (cgroup = "off")`) || strings.Count(err.Error(), "memory_max") != 1 {
		t.Errorf("Reload: %v, want one error at %s:4: defaults.memory_max", err, path)
	}
	if _, err := c.Status("v:0"); err == nil {
		t.Errorf("the refused reload added v")
	}
	_, err = c.Add(map[string]any{"name": "x", "command": []string{"true"}, "memory_max": "1GiB"})
	if err == nil || !strings.Contains(err.Error(), "memory_max: cannot be enforced here") {
		t.Errorf("Add: %v, want a refusal of memory_max", err)
	}
}

func pidOf(t *testing.T, c *client.Client, id string) int {
	t.Helper()
	st, err := c.Status(id)
	if err != nil || st.PID == nil {
		t.Fatalf("%s: %+v %v", id, st, err)
	}
	return *st.PID
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func isBadConfig(err error) bool { return errors.Is(err, program.ErrBadConfig) }
