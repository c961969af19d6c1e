package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/testutil"
)

func TestRealRunIsItsGroup(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("leaky-0")
	r := startIn(t, g, nil, leaky)
	pids := waitLeaky(t, g, r)
	if slices.Contains(pids, os.Getpid()) {
		t.Errorf("the test process is in the run's group: %v", pids)
	}
	// Each is in the group by the kernel's own account, and one of them
	// left the leader's session: a process group would have lost it.
	sessions := map[int]bool{}
	for _, p := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cgroup")
		if !strings.HasSuffix(strings.TrimSpace(string(b)), "/"+filepath.Base(tr.Path())+"/leaky-0") {
			t.Errorf("pid %d is in %q", p, b)
		}
		sid, _ := unix.Getsid(p)
		sessions[sid] = true
	}
	if len(sessions) != 2 {
		t.Errorf("sessions %v: want the leader's and the setsid child's", sessions)
	}
	if p, err := g.Populated(); err != nil || !p {
		t.Fatalf("Populated = %v, %v", p, err)
	}

	events := make(chan bool, 10)
	stop, err := g.Watch(func(p bool) { events <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitEmpty(ctx30(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-events:
		if p {
			t.Errorf("Watch reported populated true after Kill")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not report the group empty")
	}
	if p, err := g.Populated(); err != nil || p {
		t.Errorf("after Kill and WaitEmpty: Populated = %v, %v", p, err)
	}
	if pids, err := g.Procs(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill: Procs = %v, %v", pids, err)
	}
	r.reap(t) // fails unless every pid seen is gone
	if ps := r.cmd.ProcessState; ps == nil || ps.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("leader ended by %v, want SIGKILL", r.cmd.ProcessState)
	}

	if names, err := tr.Names(); err != nil || !slices.Equal(names, []string{"leaky-0"}) {
		t.Errorf("Names = %v, %v", names, err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove: %v", err)
	}
	if names, err := tr.Names(); err != nil || len(names) != 0 {
		t.Errorf("Names after Remove = %v, %v", names, err)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
	if err := g.Kill(); err != nil {
		t.Errorf("Kill of a removed group: %v", err)
	}
	if err := g.WaitEmpty(ctx30(t)); err != nil {
		t.Errorf("WaitEmpty of a removed group: %v", err)
	}
}

func TestRealPrepareEmptiesLeftover(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("web-1")
	r := startIn(t, g, nil, leaky)
	pids := waitLeaky(t, g, r)

	f, err := g.Prepare(Limits{}) // a new run: the old one must go first
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if p, err := g.Populated(); err != nil || p {
		t.Errorf("after Prepare: Populated = %v, %v", p, err)
	}
	r.reap(t)
	for _, p := range pids {
		if _, ok := procStart(p); ok {
			t.Errorf("pid %d of the old run is alive", p)
		}
	}
	// The group takes a new run, though it went through cgroup.kill (a
	// child forked into such a group is SIGKILLed at birth on Linux 6.18:
	// see Prepare).
	r2 := startIn(t, g, nil, "exec sleep 1000")
	testutil.Eventually(t, "the new run in the group", func() bool {
		pids, _ := g.Procs()
		return slices.Equal(pids, []int{r2.cmd.Process.Pid})
	})
}

func TestRealSignal(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("sig-0")
	r := startIn(t, g, nil, leaky)
	pids := waitLeaky(t, g, r)
	n, err := g.Signal(syscall.SIGTERM) // sh and sleep die of it
	if err != nil || n != len(pids) {
		t.Errorf("Signal = %d, %v; want %d", n, err, len(pids))
	}
	if err := g.WaitEmpty(ctx30(t)); err != nil {
		t.Fatal(err)
	}
	r.reap(t)
	if st := r.cmd.ProcessState.Sys().(syscall.WaitStatus); st.Signal() != syscall.SIGTERM {
		t.Errorf("leader: %v, want SIGTERM", r.cmd.ProcessState)
	}
}

// Without cgroup.kill (Linux < 5.14) Kill signals every member until none
// is new; this kernel has the file, so the fallback is called directly.
func TestRealKillBySignal(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("old-0")
	r := startIn(t, g, nil, leaky)
	waitLeaky(t, g, r)
	if err := killBySignal(g); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitEmpty(ctx30(t)); err != nil {
		t.Fatal(err)
	}
	r.reap(t)
}

func TestRealRemovePopulated(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("gone-3")
	r := startIn(t, g, nil, leaky)
	waitLeaky(t, g, r)
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove: %v", err)
	}
	r.reap(t)
}

// A run as root may make groups below its own; they are part of it.
func TestRealSubgroups(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("nest-0")
	r := startIn(t, g, []string{"CG=" + g.Path()},
		`mkdir "$CG/inner" && sh -c 'echo $$ > "$CG/inner/cgroup.procs" && exec sleep 1000' & exec sleep 1000`)
	testutil.Eventually(t, "two sleeps, one in a sub-group", func() bool {
		pids, err := g.Procs()
		if err != nil {
			t.Fatal(err)
		}
		r.see(pids)
		inner, _ := os.ReadFile(filepath.Join(g.Path(), "inner", "cgroup.procs"))
		return len(pids) == 2 && comm(pids[0]) == "sleep" && comm(pids[1]) == "sleep" && len(inner) > 0
	})
	f, err := g.Prepare(Limits{}) // empties and removes the sub-group
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(g.Path(), "inner")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub-group after Prepare: %v", err)
	}
	r.reap(t)
}

func TestRealNames(t *testing.T) {
	tr := testTree(t)
	for _, n := range []string{"b-1", "a-0", "a-b-12"} {
		f, err := tr.Group(n).Prepare(Limits{})
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, n := range []string{daemonLeaf, "foreign", "x-"} { // not instance groups
		if err := os.Mkdir(filepath.Join(tr.Path(), n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := tr.Names(); err != nil || !slices.Equal(names, []string{"a-0", "a-b-12", "b-1"}) {
		t.Errorf("Names = %v, %v", names, err)
	}
	if _, err := tr.Group("../escape-0").Prepare(Limits{}); err == nil {
		t.Errorf("Prepare of ../escape-0 succeeded")
	}
}

// A watch set once follows the group across runs, though Prepare makes
// the directory afresh each time; each run after a cgroup.kill lives.
func TestRealWatchAcrossRuns(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("w-0")
	f, err := g.Prepare(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	events := make(chan bool, 10)
	stop, err := g.Watch(func(p bool) { events <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	expect := func(want bool) {
		t.Helper()
		select {
		case p := <-events:
			if p != want {
				t.Fatalf("Watch reported %v, want %v", p, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Watch did not report %v", want)
		}
	}
	for range 2 {
		r := startIn(t, g, nil, "exec sleep 1000")
		r.see([]int{r.cmd.Process.Pid})
		expect(true)
		if err := g.Kill(); err != nil {
			t.Fatal(err)
		}
		expect(false)
		r.reap(t)
	}
	stop()
	stop() // twice is fine
	r := startIn(t, g, nil, "exec sleep 1000")
	r.see([]int{r.cmd.Process.Pid})
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitEmpty(ctx30(t)); err != nil {
		t.Fatal(err)
	}
	r.reap(t)
	select {
	case p := <-events:
		t.Errorf("after stop, Watch reported %v", p)
	case <-time.After(100 * time.Millisecond):
	}
}

// Setup "auto" on this machine: tend's group is found from mountinfo and
// /proc/self/cgroup, tend-ID is made below it, and a second Setup with the
// same id (a restarted daemon) finds the same tree and its groups.
func TestRealSetupAuto(t *testing.T) {
	cgroup2Base(t) // skips without a cgroup2 hierarchy
	selfBefore, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := parseSelfCgroup(selfBefore)
	id := fmt.Sprintf("test%d", os.Getpid())
	tr, why, err := Setup("auto", id)
	if err != nil || tr == nil {
		t.Fatalf("Setup(auto) = %v, %q, %v", tr, why, err)
	}
	t.Cleanup(func() {
		_ = tr.Close()
		if tr.DaemonGroup() != "" { // put this process back before removing
			ownDir := filepath.Dir(filepath.Dir(tr.DaemonGroup()))
			_ = writeFile(filepath.Join(ownDir, "cgroup.procs"), strconv.Itoa(os.Getpid()))
		}
		_ = (&Group{t: tr, path: tr.Path()}).Kill()
		_ = waitEmptyPoll(context.Background(), tr.Path())
		if err := removeTree(tr.Path()); err != nil {
			t.Error(err)
		}
	})
	if filepath.Base(tr.Path()) != "tend-"+id {
		t.Errorf("Path = %s, want …/tend-%s", tr.Path(), id)
	}
	if !strings.HasSuffix(filepath.Dir(tr.Path()), strings.TrimSuffix(own, "/")) && own != "/" {
		t.Errorf("Path = %s, not below tend's group %s", tr.Path(), own)
	}
	t.Logf("Path %s, controllers %v, daemon leaf %q, why %q", tr.Path(), tr.Controllers(), tr.DaemonGroup(), tr.Why())
	if !tr.HasMemory() && tr.Why() == "" {
		t.Errorf("no memory controller, and Why does not say why")
	}
	f, err := tr.Group("kept-0").Prepare(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	tr2, why, err := Setup("auto", id)
	if err != nil || tr2 == nil {
		t.Fatalf("second Setup(auto) = %v, %q, %v", tr2, why, err)
	}
	defer tr2.Close()
	if tr2.Path() != tr.Path() || !slices.Equal(tr2.Controllers(), tr.Controllers()) {
		t.Errorf("second Setup: %s %v, first %s %v", tr2.Path(), tr2.Controllers(), tr.Path(), tr.Controllers())
	}
	if names, err := tr2.Names(); err != nil || !slices.Equal(names, []string{"kept-0"}) {
		t.Errorf("second Setup's Names = %v, %v", names, err)
	}
}

// The descriptors kept for MemoryCurrent read the file anew each time,
// and survive their group being made afresh behind the Tree's back (by a
// second daemon's Prepare, or by hand). cgroup.freeze stands in for
// memory.current, absent without the memory controller.
func TestRealKeptFile(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("kept-0")
	f, err := g.Prepare(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	read := func() string {
		t.Helper()
		var buf [32]byte
		b, err := tr.kept.read(g.Path(), "cgroup.freeze", buf[:])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != "0\n" {
		t.Errorf("cgroup.freeze = %q", got)
	}
	if err := writeFile(filepath.Join(g.Path(), "cgroup.freeze"), "1"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "1\n" {
		t.Errorf("after freezing: cgroup.freeze = %q", got)
	}
	if err := unix.Rmdir(g.Path()); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkdir(g.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "0\n" {
		t.Errorf("a group made afresh: cgroup.freeze = %q", got)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	var buf [32]byte
	if _, err := tr.kept.read(g.Path(), "cgroup.freeze", buf[:]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removed group's file: %v", err)
	}
	if len(tr.kept.fds) != 0 {
		t.Errorf("%d descriptors kept after Remove", len(tr.kept.fds))
	}
}

// TestRealPrepareKeepsCleanGroup: without the memory controller a group
// whose run ended with its leader is handed to the next run as it is; a
// group that went through cgroup.kill, or has a group below it, is made
// afresh, and the run forked into it lives (the 6.18 quirk in Prepare).
func TestRealPrepareKeepsCleanGroup(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("keep-0")
	ino := func() uint64 {
		var st unix.Stat_t
		if err := unix.Stat(g.Path(), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	inGroup := func(r *run) {
		t.Helper()
		testutil.Eventually(t, "the run alone in its group", func() bool {
			pids, _ := g.Procs()
			return slices.Equal(pids, []int{r.cmd.Process.Pid})
		})
	}
	ended := func(r *run) {
		t.Helper()
		_ = r.cmd.Wait()
		testutil.Eventually(t, "the group empty", func() bool {
			p, err := g.Populated()
			return err == nil && !p
		})
	}

	r1 := startIn(t, g, nil, "exit 0")
	ended(r1)
	first := ino()
	r2 := startIn(t, g, nil, "exec sleep 1000")
	inGroup(r2)
	if kept := ino() == first; kept == tr.HasMemory() {
		t.Errorf("group kept for the next run: %v; want %v (memory controller: %v)", kept, !tr.HasMemory(), tr.HasMemory())
	}

	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	ended(r2)
	before := ino()
	r3 := startIn(t, g, nil, "exec sleep 1000")
	if ino() == before {
		t.Error("a group that went through cgroup.kill was kept for the next run")
	}
	inGroup(r3)
	if err := unix.Kill(r3.cmd.Process.Pid, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ended(r3)

	if err := os.Mkdir(filepath.Join(g.Path(), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before = ino()
	r4 := startIn(t, g, nil, "exec sleep 1000")
	if ino() == before {
		t.Error("a group with a group below it was kept for the next run")
	}
	inGroup(r4)
}

// Two trees in one real DIR, as two daemons with different state
// directories get them: each makes and empties its own groups, and neither
// reaches the other's run, nor a group of DIR's own.
func TestRealTwoTreesInOneDir(t *testing.T) {
	dir := testDir(t)
	a, why, err := Setup(dir, "aaa")
	if err != nil || a == nil {
		t.Fatalf("Setup(%s, aaa) = %v, %q, %v", dir, a, why, err)
	}
	defer a.Close()
	b, why, err := Setup(dir, "bbb")
	if err != nil || b == nil {
		t.Fatalf("Setup(%s, bbb) = %v, %q, %v", dir, b, why, err)
	}
	defer b.Close()
	if a.Path() != filepath.Join(dir, "tend-aaa") || b.Path() != filepath.Join(dir, "tend-bbb") {
		t.Fatalf("Paths %s and %s", a.Path(), b.Path())
	}
	foreign := filepath.Join(dir, "web-0")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	ra := startIn(t, a.Group("w-0"), nil, "exec sleep 1000")
	f, err := b.Group("w-0").Prepare(Limits{}) // b's run of the same name
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if names, err := b.Names(); err != nil || !slices.Equal(names, []string{"w-0"}) {
		t.Errorf("b's Names = %v, %v", names, err)
	}
	if err := b.Group("w-0").Remove(); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Group("w-0").Populated(); err != nil || !p || ra.cmd.ProcessState != nil {
		t.Errorf("a's run after b emptied its own w-0: Populated %v, %v", p, err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("DIR's own group: %v", err)
	}
}
