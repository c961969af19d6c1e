package proctree

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// The tests here start real processes. The subreaper setting is
// process-wide, so the scenario where tend adopts orphans runs in a
// re-executed copy of this test binary (TestInChild*), like os/exec's
// exec_test.go; nothing in these tests calls wait4(-1), so exec.Cmd.Wait is
// safe in both.
const (
	childEnv  = "TEND_PROCTREE_TEST_CHILD"
	helperEnv = "TEND_PROCTREE_HELPER"
)

func init() {
	if os.Getenv(helperEnv) != "" {
		// Keep the main goroutine on the main thread, so that the helper's
		// fork below comes from another thread.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "fork-from-thread" {
		forkFromThread()
		return
	}
	os.Exit(m.Run())
}

// forkFromThread starts a child from a thread other than the main one, so
// the child is listed only in that thread's children file, and stays.
func forkFromThread() {
	go func() {
		runtime.LockOSThread() // held to the end: this thread stays the parent
		cmd := exec.Command("sleep", "304")
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("sleep", cmd.Process.Pid)
		fmt.Println("tid", syscall.Gettid())
		_ = cmd.Wait()
		os.Exit(0)
	}()
	time.Sleep(time.Hour)
}

// startRun starts argv as a run leader in its own session, as tend does, and
// reads "name number" lines from its stdout until it has every name in
// names. Cleanup kills the processes named in kill in the order given
// (deepest first, so each is reaped by its own parent rather than
// orphaned), then the leader's group.
func startRun(t testing.TB, env, names, kill []string, argv ...string) (*exec.Cmd, map[string]int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	leader := cmd.Process.Pid
	got := map[string]int{}
	starts := map[string]uint64{} // so that a pid reused since is not killed
	t.Cleanup(func() {
		for _, name := range kill {
			if start := starts[name]; start != 0 {
				killAndReap(t, got[name], start)
			}
		}
		if cmd.ProcessState == nil { // not reaped: the group is still ours
			_ = syscall.Kill(-leader, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(r)
	for len(got) < len(names) && lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 2 {
			got[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	for name, pid := range got {
		if st, ok := procStat(pid, 0); ok {
			starts[name] = st.start
		}
	}
	if len(got) < len(names) {
		t.Fatalf("run printed only %v, want %v", got, names)
	}
	return cmd, got
}

// procStat reads a process's stat; false once it is gone (or reaped and its
// pid reused: start differs from a non-zero want).
func procStat(pid int, start uint64) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	st, ok := parseStat(b)
	if !ok || (start != 0 && st.start != start) {
		return stat{}, false
	}
	st.comm = append([]byte(nil), st.comm...)
	return st, true
}

// killAndReap kills pid, if it is still the process that started at start
// (0: whatever it is now), and waits until it is gone: reaped by its
// parent, or by this process if it was adopted here.
func killAndReap(t testing.TB, pid int, start uint64) {
	t.Helper()
	st, ok := procStat(pid, start)
	if !ok {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	testutil.Eventually(t, fmt.Sprintf("pid %d to be reaped", pid), func() bool {
		cur, ok := procStat(pid, st.start)
		if ok && cur.ppid == os.Getpid() && cur.state == 'Z' {
			_, _ = syscall.Wait4(pid, nil, 0, nil)
			return true
		}
		return !ok
	})
}

// waitExec waits until each pid has exec'd comm, sleeps (its memory is
// mapped by then) and, when parent is not 0, has parent as its ppid.
func waitExec(t testing.TB, comm string, parent int, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		testutil.Eventually(t, fmt.Sprintf("pid %d to be %s under %d", pid, comm, parent), func() bool {
			st, ok := procStat(pid, 0)
			return ok && string(st.comm) == comm && st.state == 'S' && (parent == 0 || st.ppid == parent)
		})
	}
}

func TestSubreaper(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInChild", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestInChild") ||
		strings.Contains(string(out), "--- FAIL") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("child tests: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// The run's shell keeps one child in its group, one subshell whose child
// left the session (member by parent link only: the subshell outlives it
// by exec'ing sleep), and double-forks twice:
// one grandchild stays in the group (adopted by this process, the
// subreaper: a member), one left the session first (adopted: not a member).
const scenario = `
sleep 300 & echo group $!
(setsid sleep 301 & echo setsid $!; wait; exec sleep 306) & echo sub $!
( sleep 302 & echo orphan $! )
( setsid sleep 305 & echo stray $! )
wait
`

func TestInChildScenario(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs in a re-executed child; see TestSubreaper")
	}
	if err := setSubreaper(); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	names := []string{"setsid", "sub", "group", "orphan", "stray"}
	cmd, p := startRun(t, nil, names, names, "/bin/sh", "-c", scenario)
	leader := cmd.Process.Pid
	waitExec(t, "sleep", leader, p["group"])
	waitExec(t, "sleep", p["sub"], p["setsid"])
	waitExec(t, "sleep", self, p["orphan"], p["stray"])

	tr := New()
	tr.selfEvery = 0
	fds := openFDs(t)
	tr.Monitor(leader) // monitored: its files stay open
	procs := checkSample(t, tr, leader, sorted(leader, p["group"], p["sub"], p["setsid"], p["orphan"]), program.TrackingTree)
	if got := openFDs(t); got != fds+2*5 {
		t.Errorf("%d fds open for 5 single-threaded members, want 10", got-fds)
	}
	want := map[int][2]int{ // pid: ppid, pgid
		leader:      {self, leader},
		p["group"]:  {leader, leader},
		p["sub"]:    {leader, leader},
		p["setsid"]: {p["sub"], p["setsid"]},
		p["orphan"]: {self, leader},
	}
	for _, proc := range procs {
		if w := want[proc.PID]; proc.PPID != w[0] || proc.PGID != w[1] || proc.RSSBytes <= 0 || proc.State != "S" {
			t.Errorf("member %+v, want ppid %d pgid %d, rss > 0, sleeping", proc, w[0], w[1])
		}
	}
	if c := find(procs, p["orphan"]).Cmd; c != "sleep 302" {
		t.Errorf("orphan's cmd = %q", c)
	}
	if c := find(procs, leader).Cmd; !strings.HasPrefix(c, "/bin/sh -c") {
		t.Errorf("leader's cmd = %q", c)
	}

	// The member outside the session ends: the rest is all group.
	killAndReap(t, p["setsid"], 0)
	checkSample(t, tr, leader, sorted(leader, p["group"], p["sub"], p["orphan"]), program.TrackingGroup)
	if got := openFDs(t); got != fds+2*4 {
		t.Errorf("%d fds open for 4 members, want 8", got-fds)
	}
	killAndReap(t, p["group"], 0)
	checkSample(t, tr, leader, sorted(leader, p["sub"], p["orphan"]), program.TrackingGroup)

	tr.Forget(leader)
	if got := openFDs(t); got != fds {
		t.Errorf("Forget leaves %d fds open", got-fds)
	}

	// The leader dies. Until it is reaped it is there, a zombie, with its
	// group (its child now adopted here); once reaped, the run is gone.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the leader to be a zombie", func() bool {
		st, ok := procStat(leader, 0)
		return ok && st.state == 'Z'
	})
	testutil.Eventually(t, "the leader's child to be adopted", func() bool {
		st, ok := procStat(p["sub"], 0)
		return ok && st.ppid == self
	})
	procs = checkSample(t, tr, leader, sorted(leader, p["sub"], p["orphan"]), program.TrackingGroup)
	if z := find(procs, leader); z.State != "Z" || z.RSSBytes != 0 {
		t.Errorf("unreaped leader = %+v", z)
	}
	_ = cmd.Wait()
	checkSample(t, tr, leader, nil, program.TrackingNone)
	if n := fdsInto(t, leader, p["sub"], p["orphan"]); n != 0 {
		t.Errorf("a gone leader's run keeps %d fds open", n)
	}
}

// setSubreaper makes this process adopt the orphans of its descendants.
func setSubreaper() error {
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errors.New("prctl(PR_SET_CHILD_SUBREAPER): " + errno.Error())
	}
	return nil
}

func sorted(pids ...int) []int {
	slices.Sort(pids)
	return pids
}

func TestLeaderGone(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	leader := cmd.Process.Pid
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not reaped: the group is still ours
			_ = syscall.Kill(-leader, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	waitExec(t, "sleep", 0, leader)

	tr := New()
	tr.Monitor(leader) // monitored: its files stay open
	procs := checkSample(t, tr, leader, []int{leader}, program.TrackingGroup)
	want := program.Process{PID: leader, PPID: os.Getpid(), PGID: leader, Cmd: "sleep 300", RSSBytes: procs[0].RSSBytes, State: procs[0].State}
	if procs[0] != want || procs[0].RSSBytes <= 0 || !strings.Contains("RS", want.State) {
		t.Errorf("leader = %+v, want %+v with rss > 0, running or sleeping", procs[0], want)
	}
	if n := fdsInto(t, leader); n != 2 {
		t.Errorf("%d fds open into /proc/%d, want its stat and children", n, leader)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	checkSample(t, tr, leader, nil, program.TrackingNone)
	if n := fdsInto(t, leader); n != 0 {
		t.Errorf("a gone leader's run keeps %d fds open", n)
	}
}

// fdsInto counts this process's fds open on files under /proc/PID/ of the
// given pids (the total moves too: os/exec holds a pidfd until Wait).
func fdsInto(t *testing.T, pids ...int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		for _, pid := range pids {
			if strings.HasPrefix(target, "/proc/"+strconv.Itoa(pid)+"/") {
				n++
			}
		}
	}
	return n
}

// A multi-threaded leader whose child was forked by a thread other than the
// main one: only that thread's children file lists it.
func TestThreadedLeader(t *testing.T) {
	cmd, p := startRun(t, []string{helperEnv + "=fork-from-thread"}, []string{"sleep", "tid"}, []string{"sleep"}, os.Args[0])
	leader := cmd.Process.Pid
	waitExec(t, "sleep", leader, p["sleep"])
	if p["tid"] == leader {
		t.Fatalf("the helper forked from its main thread")
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", leader, p["tid"]))
	if err != nil || strings.TrimSpace(string(kids)) != strconv.Itoa(p["sleep"]) {
		t.Fatalf("thread %d's children: %q %v", p["tid"], kids, err)
	}

	tr := New()
	procs := checkSample(t, tr, leader, []int{leader, p["sleep"]}, program.TrackingGroup)
	if c := find(procs, p["sleep"]).Cmd; c != "sleep 304" {
		t.Errorf("child's cmd = %q", c)
	}
	// The Go runtime of the helper may start a thread at any moment, so
	// compare the counts until one sample and one stat read agree.
	var tasks, threads int
	for try := 0; try < 100; try++ { // the tracker re-lists threads at most once a second
		tr.Monitor(leader) // monitored: the children files stay open
		st, _ := procStat(leader, 0)
		tr.mu.Lock()
		tasks = len(tr.runs[leader].members[leader].tasks)
		tr.mu.Unlock()
		if threads = st.threads; tasks == threads {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tasks != threads {
		t.Errorf("tracker holds %d threads' children files of %d threads", tasks, threads)
	}
	tr.Forget(leader)
}

// Without cgroups a stop must reach what left the run's process group: a
// setsid'd child while the leader lives (a fresh walk), and once the leader
// is gone, the members the last sample saw.
func TestSignalReachesMembersOutsideTheGroup(t *testing.T) {
	for _, leaderFirst := range []bool{false, true} {
		names := []string{"escapee", "group"}
		cmd, p := startRun(t, nil, names, nil, "/bin/sh", "-c",
			`setsid sleep 302 & echo escapee $!; sleep 303 & echo group $!; exec sleep 300`)
		leader := cmd.Process.Pid
		waitExec(t, "sleep", 0, leader, p["escapee"], p["group"])
		if st, ok := procStat(p["escapee"], 0); ok { // should the test fail before it ends
			t.Cleanup(func() {
				if now, ok := procStat(p["escapee"], 0); ok && now.start == st.start {
					syscall.Kill(p["escapee"], syscall.SIGKILL)
				}
			})
		}
		tr := New()
		if leaderFirst {
			checkSample(t, tr, leader, sorted(leader, p["escapee"], p["group"]), program.TrackingTree)
			// The leader and its group go first (as the reaper kills the
			// group of a run whose leader exited); the escapee, whose parent
			// died, is adopted by init and found only as last seen.
			syscall.Kill(-leader, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if n, _ := tr.Signal(leader, syscall.SIGKILL); n != 1 {
			t.Errorf("leader gone first %v: signalled %d, want the escapee alone", leaderFirst, n)
		}
		testutil.Eventually(t, "the escapee to end", func() bool {
			st, ok := procStat(p["escapee"], 0)
			return !ok || st.state == 'Z'
		})
		if st, ok := procStat(p["group"], 0); !leaderFirst && (!ok || st.state == 'Z') {
			t.Error("Signal reached a member of the leader's group, which the caller signals itself")
		}
		if n := fdsInto(t, leader, p["escapee"]); n != 0 {
			t.Errorf("%d fds left open into the run", n)
		}
	}
}
