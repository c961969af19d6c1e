package cgroup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/testutil"
)

// The tests here start real processes in real groups. The runs they start
// leave orphans on purpose (a setsid child, a double fork), which would go
// to pid 1, and pid 1 does not reap on every host (it does not on the
// machine these were written on): so the test binary is a subreaper, every
// orphan comes back to it, and each test reaps the pids it saw by number
// (wait4(pid), never wait4(-1)). Every test here wants that, and none
// relies on its absence, so it is set once in TestMain rather than in a
// re-executed child.
func TestMain(m *testing.M) {
	if os.Getenv(envHold) != "" { // a scope's holder, as `tend cgroup-hold` is
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		os.Exit(0)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// leaky is the brief's run: a setsid child that execs, a double-forked
// sleep, and the leader's own sleep. Each escapes a process group or
// session in its own way; none escapes the cgroup.
const leaky = `setsid sh -c "exec sleep 1000" & sh -c "sleep 1000 &" ; sleep 1000`

var testSeq atomic.Int64

// cgroup2Base returns a writable directory in a real cgroup2 hierarchy:
// this host's cgroup2 mount, or a fresh mount of one in a temporary
// directory; it skips the test, saying why, where neither works.
func cgroup2Base(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip("no /proc/self/mountinfo:", err)
	}
	ms, err := parseMountinfo(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.FSType == "cgroup2" && unix.Access(m.Point, unix.W_OK) == nil {
			return m.Point
		}
	}
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		t.Skipf("no writable cgroup2 mount, and mount -t cgroup2 failed: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// testTree makes a directory DIR with a unique name for one test, and the
// tree of `cgroup = DIR` in it (DIR/tend-test), removed at cleanup whatever
// happened: processes killed, groups removed.
func testTree(t testing.TB) *Tree {
	t.Helper()
	dir := testDir(t)
	tr, why, err := Setup(dir, "test")
	if err != nil || tr == nil {
		t.Fatalf("Setup(%s) = %v, %q, %v", dir, tr, why, err)
	}
	t.Cleanup(func() { _ = tr.Close() }) // before testDir's cleanup
	return tr
}

// testDir makes a fresh directory in a real cgroup2 hierarchy, for one
// test's `cgroup = DIR`, and removes it at cleanup with every group below
// it, their processes killed without the code under test.
func testDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(cgroup2Base(t), fmt.Sprintf("tend-test-%d-%d", os.Getpid(), testSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := waitEmptyPoll(ctx, dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := removeTree(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return dir
}

// waitEmptyPoll is for cleanup after Close, when Watch is gone.
func waitEmptyPoll(ctx context.Context, dir string) error {
	for {
		p, err := populated(dir)
		if err != nil || !p {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still populated", dir)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// run is a process started in a group, and every pid seen in it.
type run struct {
	cmd    *exec.Cmd
	starts map[int]uint64 // pid: start time, so a reused pid is not mistaken
}

// startIn prepares g and starts sh -c script in it at fork, as tend will:
// its own session, placed by clone3 CLONE_INTO_CGROUP.
func startIn(t testing.TB, g *Group, env []string, script string) *run {
	t.Helper()
	f, err := g.Prepare(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(f.Fd())}
	err = cmd.Start()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{cmd: cmd, starts: map[int]uint64{}}
	r.see([]int{cmd.Process.Pid})
	t.Cleanup(func() {
		// Whatever the test left, killed without the code under test.
		_ = os.WriteFile(filepath.Join(g.Path(), "cgroup.kill"), []byte("1"), 0)
		r.reap(t)
	})
	return r
}

// see records pids of the run, with their start times.
func (r *run) see(pids []int) {
	for _, pid := range pids {
		if _, ok := r.starts[pid]; !ok {
			if st, ok := procStart(pid); ok {
				r.starts[pid] = st
			}
		}
	}
}

// reap checks that every pid seen is gone (a zombie counts as gone),
// SIGKILLing any still alive after a generous wait; then it reaps the
// leader and every orphan adopted here (wait4 of that pid: ECHILD for one
// reaped by its own parent).
func (r *run) reap(t testing.TB) {
	t.Helper()
	for pid, start := range r.starts {
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, ok := procStart(pid)
			if !ok || st != start {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("pid %d (%s) still alive", pid, comm(pid))
				_ = unix.Kill(pid, unix.SIGKILL)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Wait()
	}
	for pid := range r.starts {
		if pid != r.cmd.Process.Pid {
			_, _ = unix.Wait4(pid, nil, 0, nil)
		}
	}
}

// procStart returns a process's start time (field 22 of its stat); false
// once it is gone or a zombie.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return st, err == nil
}

func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// waitLeaky waits until the leaky run has its four processes: the leader
// and three sleeps, all exec'd.
func waitLeaky(t testing.TB, g *Group, r *run) []int {
	t.Helper()
	var pids []int
	testutil.Eventually(t, "the run's four processes", func() bool {
		var err error
		pids, err = g.Procs()
		if err != nil {
			t.Fatal(err)
		}
		r.see(pids)
		sleeps := 0
		for _, p := range pids {
			if comm(p) == "sleep" {
				sleeps++
			}
		}
		return len(pids) == 4 && sleeps == 3 && slices.Contains(pids, r.cmd.Process.Pid)
	})
	return pids
}

func ctx30(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
