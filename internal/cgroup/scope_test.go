package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/testutil"
)

// envHold makes the test binary a scope's holder (TestMain).
const envHold = "TEND_CGROUP_TEST_HOLD"

func TestServiceOf(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		own, execPID, want string
	}{
		{"/system.slice/tend.service", self, "tend.service"},
		{"/system.slice/tend.service", "1", ""}, // a process some other started in the service
		{"/system.slice/tend@a.service", self, "tend@a.service"},
		{"/system.slice/run-u7.scope", self, ""},
		{"/user.slice/user-1000.slice/session-3.scope", self, ""},
		{"/", self, ""},
		{"/.service", self, ""},
	} {
		t.Setenv("SYSTEMD_EXEC_PID", c.execPID)
		if got := serviceOf(c.own); got != c.want {
			t.Errorf("serviceOf(%q) with SYSTEMD_EXEC_PID=%s = %q, want %q", c.own, c.execPID, got, c.want)
		}
	}
	for own, want := range map[string]string{
		"/system.slice/tend.service":                "system.slice",
		"/tend.service":                             "-.slice",
		"/app.slice/app-web.slice/tend.service":     "app-web.slice",
		"/user.slice/user-0.slice/user@0.service/x": "",
	} {
		if got := sliceOf(own); got != want {
			t.Errorf("sliceOf(%q) = %q, want %q", own, got, want)
		}
	}
}

// fakeSystemd does what systemd's StartTransientUnit does for a scope, on
// the real cgroup2 hierarchy: it makes the scope's group in the slice and
// moves the given pid into it. fail holds errors for the first calls.
type fakeSystemd struct {
	sliceDir string
	mu       sync.Mutex // guards calls and fail
	calls    []scopeSpec
	fail     []error
}

func (f *fakeSystemd) start(_ context.Context, sc scopeSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, sc)
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return err
	}
	dir := filepath.Join(f.sliceDir, sc.name)
	if err := unix.Mkdir(dir, 0o755); err != nil && err != unix.EEXIST {
		return err
	}
	return writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(sc.pid))
}

func (f *fakeSystemd) asked() []scopeSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// serviceHost is a host where this process is tend started as
// test.slice/tend.service: the two groups made in a real cgroup2 test
// directory, a /proc/self/cgroup that names the service, SYSTEMD_EXEC_PID
// this process, systemd a fakeSystemd, holders this binary.
type serviceHost struct {
	slice, svc, self string
	sd               *fakeSystemd
	holders          map[int]bool // every holder seen, reaped at cleanup
}

func newServiceHost(t *testing.T) *serviceHost {
	base := testDir(t)
	h := &serviceHost{slice: filepath.Join(base, "test.slice"), holders: map[int]bool{}}
	h.svc = filepath.Join(h.slice, "tend.service")
	if err := os.MkdirAll(h.svc, 0o755); err != nil {
		t.Fatal(err)
	}
	rel, ok := within(h.svc, cgroup2Base(t))
	if !ok {
		t.Fatalf("%s is not in %s", h.svc, cgroup2Base(t))
	}
	h.self = filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(h.self, []byte("0::"+rel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SYSTEMD_EXEC_PID", strconv.Itoa(os.Getpid()))
	h.sd = &fakeSystemd{sliceDir: h.slice}
	oldStart, oldHold := startScope, holdCommand
	startScope = h.sd.start
	holdCommand = func() *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envHold+"=1")
		return cmd
	}
	t.Cleanup(func() {
		startScope, holdCommand = oldStart, oldHold
		// Whatever the test left (testDir's cleanup kills it too, later),
		// then the holders, this process's children, are reaped.
		for _, sc := range h.sd.asked() {
			h.holders[sc.pid] = true
			_ = os.WriteFile(filepath.Join(h.slice, sc.name, "cgroup.kill"), []byte("1"), 0)
		}
		for pid := range h.holders {
			_ = unix.Kill(pid, unix.SIGKILL)
			_, _ = unix.Wait4(pid, nil, 0, nil)
		}
	})
	return h
}

func (h *serviceHost) setup(t *testing.T, id string) *Tree {
	t.Helper()
	tr, why, err := SetupAt("auto", id, "/proc/self/mountinfo", h.self)
	if err != nil || tr == nil {
		t.Fatalf("SetupAt = %v, %q, %v", tr, why, err)
	}
	return tr
}

// holder returns the one process in the scope's hold leaf.
func (h *serviceHost) holder(t *testing.T, scope string) int {
	t.Helper()
	var buf [64]byte
	b, err := readGrowing(filepath.Join(scope, holdLeaf, "cgroup.procs"), buf[:])
	if err != nil {
		t.Fatal(err)
	}
	pids, _ := parseProcs(b)
	if len(pids) != 1 {
		t.Fatalf("the hold leaf of %s holds %v, want one holder", scope, pids)
	}
	h.holders[pids[0]] = true
	return pids[0]
}

func procsOf(t *testing.T, dir string) []int {
	t.Helper()
	var buf [64]byte
	b, err := readGrowing(filepath.Join(dir, "cgroup.procs"), buf[:])
	if err != nil {
		t.Fatal(err)
	}
	pids, _ := parseProcs(b)
	return pids
}

// tend as a systemd service keeps its runs in a scope: asked of systemd
// once, found again by later daemons (one of them SIGKILLed, so with no
// Leave), given a new holder when its holder was killed, kept by Leave
// while a run lives, and let go (holder ended, subtree removed) by Leave
// once none does; then the next daemon asks for a scope again.
func TestRealScope(t *testing.T) {
	h := newServiceHost(t)
	const id = "sc1"
	scope := filepath.Join(h.slice, "tend-"+id+".scope")

	tr := h.setup(t, id)
	calls := h.sd.asked()
	if len(calls) != 1 || calls[0].name != "tend-"+id+".scope" || calls[0].slice != "test.slice" || calls[0].service != "tend.service" {
		t.Fatalf("systemd was asked for %+v, want one tend-%s.scope in test.slice before tend.service", calls, id)
	}
	if tr.Path() != filepath.Join(scope, "tend-"+id) || tr.Scope() != "tend-"+id+".scope" || tr.DaemonGroup() != "" {
		t.Errorf("Path %s, Scope %q, DaemonGroup %q", tr.Path(), tr.Scope(), tr.DaemonGroup())
	}
	holder := h.holder(t, scope)
	if holder != calls[0].pid {
		t.Errorf("the hold leaf holds %d, not the holder %d systemd was given", holder, calls[0].pid)
	}
	if p := procsOf(t, scope); len(p) != 0 {
		t.Errorf("the scope's own group holds %v: controllers could not be enabled there", p)
	}
	if _, err := os.Stat(filepath.Join(h.svc, "tend-"+id)); err == nil {
		t.Errorf("a subtree was made below the service too")
	}
	r := startIn(t, tr.Group("w-0"), nil, "exec sleep 1000")
	run := r.cmd.Process.Pid
	tr.Close() // SIGKILLed: no Leave

	tr = h.setup(t, id)
	if n := len(h.sd.asked()); n != 1 {
		t.Errorf("a restarted daemon asked systemd for a scope again (%d calls)", n)
	}
	if names, err := tr.Names(); err != nil || !slices.Equal(names, []string{"w-0"}) {
		t.Errorf("a restarted daemon's Names = %v, %v", names, err)
	}
	if got := h.holder(t, scope); got != holder {
		t.Errorf("holder %d, was %d", got, holder)
	}
	tr.Close()

	// The holder killed (by hand): the next daemon puts another there.
	_ = unix.Kill(holder, unix.SIGKILL)
	_, _ = unix.Wait4(holder, nil, 0, nil)
	tr = h.setup(t, id)
	if got := h.holder(t, scope); got == holder {
		t.Errorf("the killed holder %d is still the holder", got)
	} else {
		holder = got
	}
	if n := len(h.sd.asked()); n != 1 {
		t.Errorf("a daemon asked systemd for a scope that has a run (%d calls)", n)
	}

	// A clean stop that leaves a run (left alone) leaves its scope too.
	if err := tr.Leave(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(tr.Path()); err != nil {
		t.Errorf("Leave removed the subtree of a live run: %v", err)
	}
	if _, ok := procStart(holder); !ok {
		t.Errorf("Leave ended the holder while a run lives")
	}
	if procs := procsOf(t, filepath.Join(tr.Path(), "w-0")); !slices.Equal(procs, []int{run}) {
		t.Errorf("the run's group holds %v, want %d", procs, run)
	}

	// Once no run is left, Leave lets the scope go.
	tr = h.setup(t, id)
	if err := tr.Group("w-0").Remove(); err != nil {
		t.Fatal(err)
	}
	r.reap(t)
	if err := tr.Leave(); err != nil {
		t.Error(err)
	}
	for _, d := range []string{tr.Path(), filepath.Join(scope, holdLeaf)} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Leave: %v, want it gone", d, err)
		}
	}
	if p, err := populated(scope); err != nil || p {
		t.Errorf("the scope after Leave: populated %v, %v; want empty, for systemd to remove", p, err)
	}
	if _, ok := procStart(holder); ok {
		t.Errorf("the holder %d outlived Leave", holder)
	}

	// An empty scope is systemd's to remove: the next daemon asks anew.
	tr = h.setup(t, id)
	defer tr.Close()
	if n := len(h.sd.asked()); n != 2 {
		t.Errorf("%d calls to systemd after the scope emptied, want 2", n)
	}
	h.holder(t, scope)
}

// A scope name systemd still holds (the last one going) is asked for
// again until it is free.
func TestRealScopeExists(t *testing.T) {
	h := newServiceHost(t)
	taken := fmt.Errorf("tend-x.scope: %w", errScopeExists)
	h.sd.fail = []error{taken, taken}
	tr := h.setup(t, "sc2")
	defer tr.Close()
	if n := len(h.sd.asked()); n != 3 || tr.Scope() == "" {
		t.Errorf("%d calls, Scope %q: want 3 calls and a scope", n, tr.Scope())
	}
	h.holder(t, filepath.Join(h.slice, "tend-sc2.scope"))
}

// Without a scope, runs get groups below the service but no controllers,
// and Why says so; the holder made for the scope is not left behind.
func TestRealScopeRefused(t *testing.T) {
	h := newServiceHost(t)
	h.sd.fail = []error{errors.New("cannot reach systemd: no such file")}
	tr := h.setup(t, "sc3")
	calls := h.sd.asked()
	if tr.Path() != filepath.Join(h.svc, "tend-sc3") || tr.Scope() != "" || len(tr.Controllers()) != 0 ||
		!strings.Contains(tr.Why(), "systemd gave tend no scope for its runs (cannot reach systemd: no such file)") {
		t.Errorf("Path %s, Scope %q, Controllers %v, Why %q", tr.Path(), tr.Scope(), tr.Controllers(), tr.Why())
	}
	if rs := Unenforceable(tr, "", Limits{MemoryMax: 1 << 20}); len(rs) != 1 || !strings.Contains(rs[0].Why, "no scope") {
		t.Errorf("memory_max: %+v, want refused for want of a scope", rs)
	}
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	testutil.Eventually(t, "the refused scope's holder killed", func() bool {
		_, alive := procStart(calls[0].pid)
		return !alive
	})
	if err := tr.Leave(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(tr.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Leave left %s: %v", tr.Path(), err)
	}
}

// Runs that a tend before scopes left below the service itself stay
// there: no scope is asked for while they live.
func TestRealScopeKeepsRunsBelowTheService(t *testing.T) {
	h := newServiceHost(t)
	old := filepath.Join(h.svc, "tend-sc4")
	w := filepath.Join(old, "w-0")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	legacy := &Tree{path: old, w: newWatcher()}
	defer legacy.Close()
	r := startIn(t, &Group{t: legacy, name: "w-0", path: w}, nil, "exec sleep 1000")
	defer func() {
		_ = os.WriteFile(filepath.Join(w, "cgroup.kill"), []byte("1"), 0)
		r.reap(t)
	}()
	tr := h.setup(t, "sc4")
	defer tr.Close()
	if tr.Path() != old || tr.Scope() != "" || len(h.sd.asked()) != 0 {
		t.Errorf("Path %s, Scope %q, %d calls to systemd; want the old subtree, no scope", tr.Path(), tr.Scope(), len(h.sd.asked()))
	}
	if names, err := tr.Names(); err != nil || !slices.Equal(names, []string{"w-0"}) {
		t.Errorf("Names = %v, %v", names, err)
	}
}
