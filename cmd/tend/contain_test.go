package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// groupProcs lists the processes in the cgroup dir, sorted.
func groupProcs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// cgroupOf is pid's cgroup v2 path relative to its mount ("/tend-test-…/leak-0").
func cgroupOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestAKilledDaemonAdoptsRunsWithTheirCgroups (issue 10): a run that leaves
// its process group and session (a setsid child, a double-forked sleep)
// lives in its instance's cgroup; the daemon is SIGKILLed and started again
// on the same state directory and cgroup directory: it adopts the run (same
// pids, no second run), its processes are still all in their group and
// the status lists them; a stop of the adopted run then ends every one of
// them, the setsid child included, and leaves the group empty.
func TestAKilledDaemonAdoptsRunsWithTheirCgroups(t *testing.T) {
	cg := testutil.CgroupDir(t)
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(`[daemon]
cgroup = %q

[program.leak]
shell = "setsid sleep 100021 & sh -c 'sleep 100022 &'; exec sleep 100023"
stop_grace = "2s"
`, cg))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	group := filepath.Join(cg, "tend-"+statedir.ID(filepath.Join(dir, ".tend")), "leak-0")

	up := startUp(t, tend, conf)
	waitRunning(t, c, "leak:0")
	testutil.Eventually(t, "the run's three sleeps in its group", func() bool { return threeSleeps(group) })
	members := groupProcs(group)
	leader := pids(t, c, "leak:0")["leak:0"]
	rel := cgroupOf(leader)
	if !strings.HasSuffix(rel, "/leak-0") || cgroupOf(up.Process.Pid) == rel {
		t.Fatalf("leader in %q, daemon in %q", rel, cgroupOf(up.Process.Pid))
	}
	setsid := 0
	for _, pid := range members {
		if cmdline(pid) == "sleep 100021 " {
			setsid = pid
		}
	}
	if setsid == 0 || !slices.Contains(members, leader) {
		t.Fatalf("group %v: want the leader %d and the setsid'd sleep", members, leader)
	}
	if sid, _ := sessionOf(setsid); sid != setsid {
		t.Fatalf("the setsid'd sleep %d is in session %d, not its own", setsid, sid)
	}

	t.Logf("group %s: %v (leader %d, setsid'd %d); daemon %d in %s", rel, members, leader, setsid, up.Process.Pid, cgroupOf(up.Process.Pid))
	runs := map[string]int{}
	for _, pid := range members {
		runs[fmt.Sprintf("leak:0 pid %d (%s)", pid, cmdline(pid))] = pid
	}
	killUp(t, up, up.Process.Pid, runs)
	if got := groupProcs(group); !slices.Equal(got, members) {
		t.Fatalf("group after the daemon died: %v, was %v", got, members)
	}

	up = startUp(t, tend, conf)
	waitRunning(t, c, "leak:0")
	st, err := c.Status("leak:0")
	if err != nil {
		t.Fatal(err)
	}
	if *st.PID != leader || st.Run != 1 {
		t.Fatalf("after the restart of the daemon: pid %d run %d, want the adopted %d, run 1", *st.PID, st.Run, leader)
	}
	var listed []int
	for _, p := range st.Processes {
		listed = append(listed, p.PID)
	}
	slices.Sort(listed)
	if st.Tracking != program.TrackingCgroup || !slices.Equal(listed, members) {
		t.Errorf("the adopted run's status: tracking %q, processes %v, want cgroup and %v", st.Tracking, listed, members)
	}
	if got := groupProcs(group); !slices.Equal(got, members) || slices.Contains(got, up.Process.Pid) || cgroupOf(up.Process.Pid) == rel {
		t.Errorf("group after adoption: %v, want %v and not the daemon %d", got, members, up.Process.Pid)
	}
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(find(evs, program.KindSpawned, "leak:0")); n != 1 {
		t.Errorf("%d spawns of leak:0, want the one before the daemon died:\n%s", n, dump(evs))
	}

	code, out, errOut := tendRun(t, tend, "stop", "leak", "-c", conf)
	if code != 0 || out != "leak:0 stopped\n" {
		t.Fatalf("tend stop: exit %d: %s%s", code, out, errOut)
	}
	for _, pid := range members {
		if testutil.Alive(pid) {
			t.Errorf("pid %d (%s) of the adopted run outlived its stop", pid, cmdline(pid))
		}
	}
	if testutil.Populated(group) {
		t.Errorf("the group still holds %v after the stop", groupProcs(group))
	}

	// The group serves the next run, and tend down leaves it empty.
	if code, out, errOut := tendRun(t, tend, "start", "leak", "-c", conf); code != 0 {
		t.Fatalf("tend start: exit %d: %s%s", code, out, errOut)
	}
	testutil.Eventually(t, "the new run's three sleeps in its group", func() bool { return threeSleeps(group) })
	again := groupProcs(group)
	if code, out, errOut := tendRun(t, tend, "down", "-c", conf); code != 0 {
		t.Fatalf("tend down: exit %d: %s%s", code, out, errOut)
	}
	up.Wait()
	for _, pid := range again {
		testutil.Eventually(t, fmt.Sprintf("pid %d to be gone", pid), func() bool { return !testutil.Alive(pid) })
	}
	if testutil.Populated(cg) {
		t.Errorf("tend down left processes in %s", cg)
	}
}

// threeSleeps reports whether the group holds the leak run's three
// processes, each exec'd: the leader's sleep, the setsid'd one and the
// double-forked one.
func threeSleeps(group string) bool {
	var cmds []string
	for _, pid := range groupProcs(group) {
		cmds = append(cmds, cmdline(pid))
	}
	slices.Sort(cmds)
	return slices.Equal(cmds, []string{"sleep 100021 ", "sleep 100022 ", "sleep 100023 "})
}

// sessionOf is pid's session id (/proc/PID/stat field 6).
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return 0, false
	}
	n, err := strconv.Atoi(f[3])
	return n, err == nil
}

// TestStopWaitsForAProcessSlowToDie: tend stop returns only once every
// process of the run is gone (docs/cli.md#verbs-that-wait), also one the kernel takes a while to
// end: it ignores SIGTERM, so the kill that follows its leader's exit ends
// it, and it holds memory the kernel must free as it exits. Five stops in a
// row, each checked the moment the stop's answer arrives.
func TestStopWaitsForAProcessSlowToDie(t *testing.T) {
	hog := helperBinary(t, "tend-hog")
	for _, mode := range []string{"cgroup", "group"} {
		t.Run(mode, func(t *testing.T) {
			daemon := `cgroup = "off"`
			if mode == "cgroup" {
				daemon = fmt.Sprintf("cgroup = %q", testutil.CgroupDir(t))
			}
			dir := t.TempDir()
			tend := tendBinary(t)
			conf := filepath.Join(dir, "tend.toml")
			write(t, conf, fmt.Sprintf(`[daemon]
%s

[program.slow]
shell = "%s 128 & trap 'exit 0' TERM; sleep 100000 & wait"
stop_grace = "30s"
`, daemon, hog))
			c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
			startUp(t, tend, conf)
			for i := range 5 {
				if i > 0 {
					if _, err := c.Act(context.Background(), "start", "slow", client.ActOptions{Wait: true}); err != nil {
						t.Fatal(err)
					}
				}
				var hogPID int
				testutil.Eventually(t, "the hog holding its memory", func() bool {
					st, _ := c.Status("slow:0")
					for _, p := range st.Processes {
						if strings.Contains(p.Cmd, "tend-hog") && p.RSSBytes >= 100<<20 {
							hogPID = p.PID
							return true
						}
					}
					return false
				})
				res, err := c.Act(context.Background(), "stop", "slow", client.ActOptions{Wait: true})
				if a := testutil.Alive(hogPID); err != nil || len(res.Failed) != 0 || a {
					t.Fatalf("stop %d: %+v %v; the hog (pid %d) alive after the stop answered: %v", i+1, res, err, hogPID, a)
				}
			}
		})
	}
}
