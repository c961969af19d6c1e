package proctree

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// These tests run the Tracker over a stand-in /proc made of plain files:
// every shape of tree (reuse, exec, threads, adoption) on demand. Held
// descriptors see rewrites of a file in place, as they see a live /proc.

const fakeSelf = 1000

type fakeProc struct {
	t    *testing.T
	root string
	now  time.Time
}

// ps is one fake process.
type ps struct {
	pid, ppid, pgid, sid int
	comm, cmd            string
	state                byte
	threads              int
	start                uint64
	rssPages             int64
}

func newFake(t *testing.T) (*fakeProc, *Tracker) {
	f := &fakeProc{t: t, root: t.TempDir(), now: time.Unix(1e9, 0)}
	f.children(fakeSelf, fakeSelf)
	tr := NewAt(f.root, fakeSelf)
	tr.now = func() time.Time { return f.now }
	tr.selfEvery = 0
	t.Cleanup(func() {
		for leader := range tr.runs {
			tr.Forget(leader)
		}
	})
	return f, tr
}

func (f *fakeProc) write(path, s string) {
	f.t.Helper()
	path = filepath.Join(f.root, path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// add writes (or rewrites) p's stat and cmdline.
func (f *fakeProc) add(p ps) {
	f.t.Helper()
	if p.state == 0 {
		p.state = 'S'
	}
	if p.threads == 0 {
		p.threads = 1
	}
	if p.start == 0 {
		p.start = 500
	}
	if p.rssPages == 0 && p.state != 'Z' {
		p.rssPages = 10
	}
	if p.comm == "" {
		p.comm = "sleep"
	}
	dir := strconv.Itoa(p.pid)
	f.write(dir+"/stat", fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 %d 0 %d 1000 %d 18446744073709551615 0\n",
		p.pid, p.comm, p.state, p.ppid, p.pgid, p.sid, p.threads, p.start, p.rssPages))
	f.write(dir+"/cmdline", strings.ReplaceAll(p.cmd, " ", "\x00"))
	if _, err := os.Stat(filepath.Join(f.root, dir, "task", dir, "children")); err != nil {
		f.children(p.pid, p.pid)
	}
}

// children sets the children file of thread tid of pid.
func (f *fakeProc) children(pid, tid int, kids ...int) {
	var b strings.Builder
	for _, k := range kids {
		fmt.Fprintf(&b, "%d ", k)
	}
	f.write(fmt.Sprintf("%d/task/%d/children", pid, tid), b.String())
}

// exit makes pid gone: a held stat reads as nothing, a new open fails.
func (f *fakeProc) exit(pid int) {
	f.t.Helper()
	f.write(strconv.Itoa(pid)+"/stat", "")
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

func pids(procs []program.Process) []int {
	var out []int
	for _, p := range procs {
		out = append(out, p.PID)
	}
	return out
}

func find(procs []program.Process, pid int) program.Process {
	for _, p := range procs {
		if p.PID == pid {
			return p
		}
	}
	return program.Process{}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func checkSample(t *testing.T, tr *Tracker, leader int, wantPids []int, wantTracking string) []program.Process {
	t.Helper()
	procs, tracking, rss := tr.Sample(leader, 0)
	if got := fmt.Sprint(pids(procs)); got != fmt.Sprint(wantPids) || tracking != wantTracking {
		t.Fatalf("Sample(%d) = %v %s, want %v %s", leader, got, tracking, wantPids, wantTracking)
	}
	var sum int64
	for _, p := range procs {
		sum += p.RSSBytes
	}
	if sum != rss {
		t.Errorf("rss %d is not the sum %d of %v", rss, sum, procs)
	}
	return procs
}

// A tree of every kind of member: group, tree-only, adopted orphan, and
// processes that must stay out.
func fakeTree(f *fakeProc) {
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, comm: "sh", cmd: "sh -c run"})
	f.add(ps{pid: 101, ppid: 100, pgid: 100, sid: 100, cmd: "sleep 300"})
	f.add(ps{pid: 102, ppid: 100, pgid: 102, sid: 102, comm: "daemon", cmd: "daemon --fork"}) // setsid
	f.add(ps{pid: 103, ppid: 102, pgid: 102, sid: 102, cmd: "sleep 301"})
	f.add(ps{pid: 104, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "sleep 302"}) // adopted orphan
	f.add(ps{pid: 105, ppid: fakeSelf, pgid: 105, sid: 105, cmd: "sleep 303"}) // adopted, left the session
	f.add(ps{pid: 106, ppid: 1, pgid: 100, sid: 100, cmd: "sleep 304"})        // adopted by init, never seen
	f.children(100, 100, 101, 102)
	f.children(102, 102, 103)
	f.add(ps{pid: 200, ppid: fakeSelf, pgid: 200, sid: 200, cmd: "other run"})
	f.add(ps{pid: 201, ppid: 200, pgid: 200, sid: 200, cmd: "other child"})
	f.children(200, 200, 201)
	f.children(fakeSelf, fakeSelf, 100, 105)
	f.children(fakeSelf, fakeSelf+1, 200, 104) // forked, or adopted, by another of tend's threads
}

func TestFakeMembers(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	fds := openFDs(t)

	tr.Monitor(100) // a monitored run keeps its files open
	tr.Monitor(200)
	procs := checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	want := program.Process{PID: 103, PPID: 102, PGID: 102, Cmd: "sleep 301", RSSBytes: 10 * tr.pageSize, State: "S"}
	if got := find(procs, 103); got != want {
		t.Errorf("member 103 = %+v, want %+v", got, want)
	}
	if got := find(procs, 104); got.PPID != fakeSelf || got.PGID != 100 {
		t.Errorf("adopted orphan = %+v", got)
	}
	// Each member of a monitored run holds its stat and its thread's
	// children file: 5 of run 100, 2 of run 200.
	if got := openFDs(t); got != fds+2*5+2*2 {
		t.Errorf("%d fds open for 5+2 members, want %d", got-fds, 2*7)
	}
	checkSample(t, tr, 200, []int{200, 201}, program.TrackingGroup)

	// The setsid'd branch ends: the rest is all group.
	f.exit(103)
	f.exit(102)
	f.children(100, 100, 101)
	checkSample(t, tr, 100, []int{100, 101, 104}, program.TrackingGroup)
	if got := openFDs(t); got != fds+2*3+2*2 {
		t.Errorf("%d fds open for 3+2 members, want %d", got-fds, 2*5)
	}

	tr.Forget(100)
	tr.Forget(200)
	if got := openFDs(t); got != fds {
		t.Errorf("Forget leaves %d fds open", got-fds)
	}
	if len(tr.runs) != 0 {
		t.Errorf("Forget keeps %d runs", len(tr.runs))
	}
}

func TestFakeLeaderOnly(t *testing.T) {
	f, tr := newFake(t)
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "sleep 1"})
	procs := checkSample(t, tr, 100, []int{100}, program.TrackingGroup)
	if procs[0].Cmd != "sleep 1" || procs[0].PPID != fakeSelf {
		t.Errorf("leader = %+v", procs[0])
	}
	// Not a leader: in someone else's session.
	f.add(ps{pid: 300, ppid: 1, pgid: 299, sid: 299})
	checkSample(t, tr, 300, nil, program.TrackingNone)
	checkSample(t, tr, 999, nil, program.TrackingNone)
	checkSample(t, tr, fakeSelf, nil, program.TrackingNone)
	if _, ok := tr.runs[300]; ok {
		t.Error("a failed sample keeps its run")
	}
}

func TestFakeLeaderGone(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	fds := openFDs(t)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	f.exit(100)
	procs, tracking, rss := tr.Sample(100, 0)
	if procs == nil || len(procs) != 0 || tracking != program.TrackingNone || rss != 0 {
		t.Errorf("gone leader: %v %q %d", procs, tracking, rss)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("a gone leader's run keeps %d fds open", got-fds)
	}
}

// A member whose parent died and which init adopted is still found through
// its group, once seen; one that also left the session is not.
func TestFakeKnownMemberAdoptedElsewhere(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	f.exit(100 + 2)
	f.add(ps{pid: 103, ppid: 1, pgid: 102, sid: 102, cmd: "sleep 301"})
	f.add(ps{pid: 101, ppid: 1, pgid: 100, sid: 100, cmd: "sleep 300"})
	f.children(100, 100)
	procs := checkSample(t, tr, 100, []int{100, 101, 104}, program.TrackingGroup)
	if find(procs, 101).PPID != 1 {
		t.Errorf("adopted member: %+v", find(procs, 101))
	}
}

func TestFakePidReuseAndExec(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	fds := openFDs(t)
	tr.Monitor(100) // monitored: its files stay open
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)

	// 101 execs: same start, new comm and cmdline.
	f.add(ps{pid: 101, ppid: 100, pgid: 100, sid: 100, comm: "python3", cmd: "python3 work.py"})
	// 103 exits and its pid is reused by another child of 102, same comm.
	f.add(ps{pid: 103, ppid: 102, pgid: 102, sid: 102, start: 900, cmd: "sleep 999"})
	procs := checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	if got := find(procs, 101).Cmd; got != "python3 work.py" {
		t.Errorf("after exec, cmd = %q", got)
	}
	if got := find(procs, 103).Cmd; got != "sleep 999" {
		t.Errorf("after pid reuse, cmd = %q", got)
	}
	if got := openFDs(t); got != fds+2*5 {
		t.Errorf("%d fds open for 5 members", got-fds)
	}

	// A reused pid that is no longer a child of 102 is dropped.
	f.add(ps{pid: 103, ppid: 55, pgid: 55, sid: 55, start: 901})
	checkSample(t, tr, 100, []int{100, 101, 102, 104}, program.TrackingTree)
}

func TestFakeZombie(t *testing.T) {
	f, tr := newFake(t)
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "sh -c x"})
	f.add(ps{pid: 101, ppid: 100, pgid: 100, sid: 100, state: 'Z', cmd: ""})
	f.children(100, 100, 101)
	procs := checkSample(t, tr, 100, []int{100, 101}, program.TrackingGroup)
	if z := find(procs, 101); z.State != "Z" || z.Cmd != "[sleep]" || z.RSSBytes != 0 {
		t.Errorf("zombie = %+v", z)
	}
}

func TestFakeThreads(t *testing.T) {
	f, tr := newFake(t)
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, threads: 3, comm: "node", cmd: "node app.js"})
	f.children(100, 100)
	f.children(100, 110)
	f.children(100, 111, 120) // forked by a thread other than the main one
	f.add(ps{pid: 120, ppid: 100, pgid: 100, sid: 100, cmd: "sleep 5"})
	fds := openFDs(t)
	tr.Monitor(100) // keeps its files open
	checkSample(t, tr, 100, []int{100, 120}, program.TrackingGroup)
	if got := openFDs(t); got != fds+1+3+2 {
		t.Errorf("%d fds open, want stat and 3 threads for 100, 2 for 120", got-fds)
	}

	// Thread 111 exits, its child moves to another thread; 110 forks 121.
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, threads: 2, comm: "node", cmd: "node app.js"})
	if err := os.RemoveAll(filepath.Join(f.root, "100/task/111")); err != nil {
		t.Fatal(err)
	}
	f.children(100, 110, 120, 121)
	f.add(ps{pid: 121, ppid: 100, pgid: 100, sid: 100, cmd: "sleep 6"})
	checkSample(t, tr, 100, []int{100, 120, 121}, program.TrackingGroup)

	// The thread list is re-listed no more than every taskEvery.
	f.now = f.now.Add(tr.taskEvery)
	checkSample(t, tr, 100, []int{100, 120, 121}, program.TrackingGroup)
	if got := openFDs(t); got != fds+1+2+2+2 {
		t.Errorf("%d fds open after thread 111 exited", got-fds)
	}

	// Thread 112 replaces 110 (the count stays 2) and forks 122: seen once
	// the list is re-listed anyway.
	if err := os.RemoveAll(filepath.Join(f.root, "100/task/110")); err != nil {
		t.Fatal(err)
	}
	f.children(100, 100, 120, 121)
	f.children(100, 112, 122)
	f.add(ps{pid: 122, ppid: 100, pgid: 100, sid: 100, cmd: "sleep 7"})
	f.now = f.now.Add(9 * tr.taskEvery)
	checkSample(t, tr, 100, []int{100, 120, 121}, program.TrackingGroup)
	f.now = f.now.Add(tr.taskEvery)
	checkSample(t, tr, 100, []int{100, 120, 121, 122}, program.TrackingGroup)
}

func TestFakeMaxAge(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	first, _, _ := tr.Sample(100, time.Second)
	f.exit(101)
	f.children(100, 100, 102)
	f.now = f.now.Add(999 * time.Millisecond)
	if again, _, _ := tr.Sample(100, time.Second); len(again) != len(first) {
		t.Errorf("a sample younger than maxAge was redone: %v", pids(again))
	}
	if fresh, _, _ := tr.Sample(100, 0); len(fresh) != len(first)-1 {
		t.Errorf("maxAge 0 gives the cached %v", pids(fresh))
	}
	f.now = f.now.Add(time.Second)
	f.exit(102)
	f.exit(103)
	if fresh, _, _ := tr.Sample(100, time.Second); fmt.Sprint(pids(fresh)) != "[100 104]" {
		t.Errorf("an old sample was reused: %v", pids(fresh))
	}
	// Members says when its sample was taken: a reused one, its time.
	taken := f.now
	f.now = f.now.Add(500 * time.Millisecond)
	if m := tr.Members(100, time.Second); !m.At.Equal(taken) || len(m.Procs) != 2 {
		t.Errorf("reused sample: as of %v with %v, want as of %v", m.At, pids(m.Procs), taken)
	}
	if m := tr.Members(100, 0); !m.At.Equal(f.now) {
		t.Errorf("fresh sample: as of %v, want %v", m.At, f.now)
	}
}

// New orphans show up once the index of tend's children is re-listed.
func TestFakeOrphanIndexAge(t *testing.T) {
	f, tr := newFake(t)
	tr.selfEvery = time.Second
	fakeTree(f)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	f.add(ps{pid: 107, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "sleep 307"})
	f.children(fakeSelf, fakeSelf, 100, 105, 107)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	f.now = f.now.Add(time.Second)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104, 107}, program.TrackingTree)
}

// A candidate orphan that left the session since it was indexed is read
// again by the next listing, not tried by every sample.
func TestFakeOrphanLeftSession(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	f.add(ps{pid: 107, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "daemon"})
	f.children(fakeSelf, fakeSelf, 100, 105, 107)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104, 107}, program.TrackingTree)
	f.add(ps{pid: 107, ppid: fakeSelf, pgid: 107, sid: 107, cmd: "daemon"})
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
	if got := tr.orphans.of[100]; fmt.Sprint(got) != "[104]" {
		t.Errorf("candidates for 100 = %v, want [104]", got)
	}
	if got := tr.orphans.of[107]; got != nil {
		t.Errorf("a session leader is a candidate for its own session: %v", got)
	}
}

func TestFakeOnlyMonitoredRunsHoldFiles(t *testing.T) {
	// A run sampled (a status asked, a listing, however often) holds
	// nothing open after the sample; a run the memory watchdog monitors
	// keeps its files.
	f, tr := newFake(t)
	fakeTree(f)
	fds := openFDs(t)
	for range 3 {
		checkSample(t, tr, 100, []int{100, 101, 102, 103, 104}, program.TrackingTree)
		if got := openFDs(t); got != fds {
			t.Errorf("a sampled run keeps %d fds open", got-fds)
		}
	}
	if rss := tr.Monitor(100); rss <= 0 {
		t.Errorf("Monitor rss %d", rss)
	}
	if got := openFDs(t); got != fds+2*5 {
		t.Errorf("a monitored run holds %d fds, want 10", got-fds)
	}
}

// A fork bomb's tree is capped: the status lists MaxMembers processes and
// says it is truncated, and the tracker holds no file for the rest.
func TestFakeForkBombIsTruncated(t *testing.T) {
	f, tr := newFake(t)
	f.add(ps{pid: 100, ppid: fakeSelf, pgid: 100, sid: 100, cmd: "bomb"})
	var kids []int
	for i := 0; i < MaxMembers+50; i++ {
		pid := 1000 + i
		f.add(ps{pid: pid, ppid: 100, pgid: 100, sid: 100, cmd: "bomb"})
		kids = append(kids, pid)
	}
	f.children(100, 100, kids...)
	m := tr.Members(100, 0)
	if len(m.Procs) != MaxMembers || !m.Truncated {
		t.Fatalf("%d processes listed, truncated %v; want %d and true", len(m.Procs), m.Truncated, MaxMembers)
	}
	for _, pid := range kids[10:] {
		f.exit(pid)
	}
	f.children(100, 100, kids[:10]...)
	if m := tr.Members(100, 0); len(m.Procs) != 11 || m.Truncated {
		t.Fatalf("after the bomb: %d processes, truncated %v", len(m.Procs), m.Truncated)
	}
}

// Describe reads the members of a cgroup; a process whose pid and comm are
// unchanged keeps the command line read before.
func TestFakeDescribe(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	procs, rss, truncated := tr.Describe([]int{103, 101, 999}, nil) // 999 is gone
	if len(procs) != 2 || procs[0].PID != 101 || procs[1].Cmd != "sleep 301" || truncated || rss != procs[0].RSSBytes+procs[1].RSSBytes {
		t.Fatalf("Describe: %+v rss %d truncated %v", procs, rss, truncated)
	}
	f.add(ps{pid: 103, ppid: 102, pgid: 102, sid: 102, cmd: "sleep 302"}) // same comm: cmdline not read again
	again, _, _ := tr.Describe([]int{101, 103}, procs)
	if again[1].Cmd != "sleep 301" {
		t.Errorf("cmd read again for an unchanged process: %q", again[1].Cmd)
	}
	f.add(ps{pid: 103, ppid: 102, pgid: 102, sid: 102, comm: "python3", cmd: "python3 w.py"}) // an exec
	again, _, _ = tr.Describe([]int{101, 103}, procs)
	if again[1].Cmd != "python3 w.py" {
		t.Errorf("after an exec, cmd = %q", again[1].Cmd)
	}
}
