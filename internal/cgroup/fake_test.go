package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The memory figures and OOM counts are tested on a fake cgroupfs: a
// temporary directory of hand-written files, reached through SetupAt with
// a fake mountinfo that calls it a cgroup2 mount. The kernel's own OOM path
// is not driven: on the machine these tests were written on, the memory
// controller is bound to the cgroup v1 hierarchy (/sys/fs/cgroup/memory),
// so no cgroup2 group has memory.current, memory.max or memory.events, and
// a real OOM kill cannot be provoked in one.

// fakeFS is a fake cgroup2 mount at root.
type fakeFS struct {
	t         testing.TB
	root      string
	mountinfo string
	self      string // a fake /proc/self/cgroup
}

func newFake(t testing.TB) *fakeFS {
	root := t.TempDir()
	f := &fakeFS{t: t, root: root,
		mountinfo: filepath.Join(t.TempDir(), "mountinfo"),
		self:      filepath.Join(t.TempDir(), "cgroup"),
	}
	f.write(f.mountinfo, "31 23 0:28 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755\n"+
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory\n"+
		"41 31 0:38 / "+root+" rw,relatime shared:19 - cgroup2 cgroup2 rw\n")
	return f
}

func (f *fakeFS) write(file, content string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// group writes a fake group's interface files.
func (f *fakeFS) group(dir string, files map[string]string) {
	f.t.Helper()
	for name, content := range files {
		f.write(filepath.Join(dir, name), content)
	}
}

// subtree writes what the kernel would make in parent/tend-ID, a daemon's
// subtree, when Setup makes it: a fake file system has no kernel to make
// the interface files.
func (f *fakeFS) subtree(parent, id string) string {
	f.t.Helper()
	dir := filepath.Join(parent, "tend-"+id)
	f.group(dir, map[string]string{"cgroup.procs": "", "cgroup.subtree_control": ""})
	return dir
}

func (f *fakeFS) read(file string) string {
	f.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func TestFakeMemory(t *testing.T) {
	f := newFake(t)
	dir := filepath.Join(f.root, "tend")
	f.group(dir, map[string]string{
		"cgroup.procs":           "",
		"cgroup.controllers":     "cpuset cpu io memory pids\n",
		"cgroup.subtree_control": "cpu memory pids\n",
	})
	f.subtree(dir, "x")
	tr, _, err := SetupAt(dir, "x", f.mountinfo, f.self)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !tr.HasMemory() || !slices.Equal(tr.Controllers(), []string{"cpu", "memory", "pids"}) || tr.Why() != "" {
		t.Errorf("HasMemory %v, Controllers %v, Why %q", tr.HasMemory(), tr.Controllers(), tr.Why())
	}
	g := tr.Group("web-0")
	events := func(oomKill int) string {
		return "low 0\nhigh 0\nmax 12\noom 2\noom_kill " + strconv.Itoa(oomKill) + "\noom_group_kill 0\n"
	}
	f.group(g.Path(), map[string]string{
		"memory.current": "1234567\n",
		"memory.peak":    "7654321\n",
		"memory.max":     "max\n",
		"memory.events":  events(0),
	})
	m, err := g.Memory()
	if err != nil || m != (Memory{Current: 1234567, Peak: 7654321, Max: 0, OOMKills: 0}) {
		t.Errorf("Memory = %+v, %v", m, err)
	}
	if c, err := g.MemoryCurrent(); err != nil || c != 1234567 {
		t.Errorf("MemoryCurrent = %d, %v", c, err)
	}
	f.group(g.Path(), map[string]string{"memory.current": "2345678\n"})
	if c, err := g.MemoryCurrent(); err != nil || c != 2345678 { // the kept descriptor reads anew
		t.Errorf("MemoryCurrent after a change = %d, %v", c, err)
	}

	// The OOM killer ends two processes of the run: the count rises.
	f.group(g.Path(), map[string]string{"memory.events": events(2), "memory.max": "268435456\n"})
	if m, err := g.Memory(); err != nil || m.OOMKills != 2 || m.Max != 256<<20 {
		t.Errorf("after OOM kills: Memory = %+v, %v", m, err)
	}

	// No memory.peak (Linux < 5.19): Peak is 0, the rest as before.
	if err := os.Remove(filepath.Join(g.Path(), "memory.peak")); err != nil {
		t.Fatal(err)
	}
	if m, err := g.Memory(); err != nil || m.Peak != 0 || m.Current != 2345678 {
		t.Errorf("without memory.peak: Memory = %+v, %v", m, err)
	}

	// Bad or missing files are errors.
	f.group(g.Path(), map[string]string{"memory.current": "12k\n"})
	if _, err := g.Memory(); err == nil {
		t.Errorf("memory.current 12k: no error")
	}
	if err := os.Remove(filepath.Join(g.Path(), "memory.current")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Memory(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("without memory.current: %v, want ErrNotExist", err)
	}
}

func TestFakeNoMemoryController(t *testing.T) {
	f := newFake(t)
	dir := filepath.Join(f.root, "tend")
	f.group(dir, map[string]string{
		"cgroup.procs":           "",
		"cgroup.controllers":     "cpu pids\n",
		"cgroup.subtree_control": "cpu pids\n",
	})
	f.subtree(dir, "x")
	tr, _, err := SetupAt(dir, "x", f.mountinfo, f.self)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.HasMemory() || !strings.Contains(tr.Why(), "cgroup v1 hierarchy at /sys/fs/cgroup/memory") {
		t.Errorf("HasMemory %v, Why %q", tr.HasMemory(), tr.Why())
	}
}

// Setup "auto" where tend runs in a group with controllers to delegate
// (here a service's, but tend is not the process systemd started there,
// so no scope is asked for; or a tend re-executed in the leaf it had
// moved to): it moves itself into tend-ID/daemon and enables the
// controllers in its group and in tend-ID.
func TestFakeAutoMovesDaemon(t *testing.T) {
	f := newFake(t)
	own := filepath.Join(f.root, "system.slice", "tend.service")
	f.group(own, map[string]string{
		"cgroup.type":            "domain\n",
		"cgroup.procs":           "",
		"cgroup.controllers":     "cpuset cpu io memory pids\n",
		"cgroup.subtree_control": "",
	})
	tdir := filepath.Join(own, "tend-abc")
	// A fake file system has no kernel to make the interface files.
	f.group(tdir, map[string]string{"cgroup.subtree_control": ""})
	f.group(filepath.Join(tdir, daemonLeaf), map[string]string{"cgroup.procs": ""})

	for _, self := range []string{
		"0::/system.slice/tend.service\n",
		"0::/system.slice/tend.service/tend-abc/daemon\n", // re-executed in its leaf
	} {
		f.write(f.self, "12:memory:/\n"+self)
		tr, why, err := SetupAt("auto", "abc", f.mountinfo, f.self)
		if err != nil || tr == nil {
			t.Fatalf("SetupAt = %v, %q, %v", tr, why, err)
		}
		tr.Close()
		if tr.Path() != tdir || tr.DaemonGroup() != filepath.Join(tdir, daemonLeaf) || !tr.HasMemory() || tr.Why() != "" {
			t.Errorf("%q: Path %s, DaemonGroup %s, HasMemory %v, Why %q", self, tr.Path(), tr.DaemonGroup(), tr.HasMemory(), tr.Why())
		}
		if got := f.read(filepath.Join(tdir, daemonLeaf, "cgroup.procs")); got != strconv.Itoa(os.Getpid()) {
			t.Errorf("daemon leaf's cgroup.procs = %q", got)
		}
		for _, d := range []string{own, tdir} {
			if got := f.read(filepath.Join(d, "cgroup.subtree_control")); got != "+cpu +memory +pids" {
				t.Errorf("%s/cgroup.subtree_control = %q", d, got)
			}
		}
		f.group(own, map[string]string{"cgroup.subtree_control": ""})
		f.group(tdir, map[string]string{"cgroup.subtree_control": ""})
	}
}

// At the hierarchy's root (no cgroup.type) nothing is moved.
func TestFakeAutoAtRoot(t *testing.T) {
	f := newFake(t)
	f.group(f.root, map[string]string{"cgroup.procs": "", "cgroup.controllers": "memory\n", "cgroup.subtree_control": "memory\n"})
	f.group(filepath.Join(f.root, "tend-r"), map[string]string{"cgroup.subtree_control": ""})
	f.write(f.self, "0::/\n")
	tr, why, err := SetupAt("", "r", f.mountinfo, f.self) // "" is auto
	if err != nil || tr == nil {
		t.Fatalf("SetupAt = %v, %q, %v", tr, why, err)
	}
	defer tr.Close()
	if tr.Path() != filepath.Join(f.root, "tend-r") || tr.DaemonGroup() != "" || !tr.HasMemory() {
		t.Errorf("Path %s, DaemonGroup %q, HasMemory %v", tr.Path(), tr.DaemonGroup(), tr.HasMemory())
	}
	if _, err := os.Stat(filepath.Join(f.root, "tend-r", daemonLeaf)); err == nil {
		t.Errorf("a daemon leaf was made at the root")
	}
}

// Where auto cannot use cgroups it says why, in a line a person can act on.
func TestFakeAutoWhy(t *testing.T) {
	f := newFake(t)
	noV2 := filepath.Join(t.TempDir(), "mountinfo")
	f.write(noV2, "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
	f.write(f.self, "0::/\n")
	v1only := filepath.Join(t.TempDir(), "cgroup")
	f.write(v1only, "4:memory:/x\n")
	outside := filepath.Join(t.TempDir(), "cgroup")
	f.write(outside, "0::/../../elsewhere\n")
	for _, c := range []struct {
		mode, mountinfo, self, want string
	}{
		{"off", f.mountinfo, f.self, `cgroup = "off"`},
		{"auto", noV2, f.self, "no cgroup2 mount in " + noV2},
		{"auto", f.mountinfo, v1only, "no cgroup v2 entry (0::) in " + v1only},
		{"auto", f.mountinfo, outside, "outside this cgroup namespace"},
		{"auto", "/nonexistent/mountinfo", f.self, "cannot read /nonexistent/mountinfo"},
	} {
		tr, why, err := SetupAt(c.mode, "x", c.mountinfo, c.self)
		if tr != nil || err != nil || !strings.Contains(why, c.want) {
			t.Errorf("SetupAt(%s, %s, %s) = %v, %q, %v; want why %q", c.mode, c.mountinfo, c.self, tr, why, err, c.want)
		}
	}
}

// A read-only cgroup2 mount (a container's default): groups cannot be
// made, and auto says so.
func TestFakeAutoReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	f := newFake(t)
	if err := unix.Mount("tmpfs", f.root, "tmpfs", unix.MS_RDONLY, ""); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(f.root, unix.MNT_DETACH) })
	f.write(f.self, "0::/\n")
	tr, why, err := SetupAt("auto", "x", f.mountinfo, f.self)
	if tr != nil || err != nil || !strings.Contains(why, "cannot create groups below "+f.root+": read-only file system; give tend a writable cgroup2 mount") {
		t.Errorf("SetupAt = %v, %q, %v", tr, why, err)
	}
}

// cgroup = DIR is a parent: each daemon (each state directory id) gets
// DIR/tend-ID, exactly as auto does below tend's own group, stays where it
// is, and sees only its own groups: never another daemon's, nor one of
// DIR's own (a foreign "web-0" among them).
func TestFakeDirIsAParent(t *testing.T) {
	f := newFake(t)
	dir := filepath.Join(f.root, "shared")
	f.group(dir, map[string]string{"cgroup.procs": "", "cgroup.controllers": "cpu pids\n", "cgroup.subtree_control": ""})
	foreign := filepath.Join(dir, "web-0")
	f.group(foreign, map[string]string{"cgroup.procs": "4242\n"})
	var trees []*Tree
	for _, id := range []string{"aaa", "bbb"} {
		f.subtree(dir, id)
		tr, why, err := SetupAt(dir, id, f.mountinfo, f.self)
		if err != nil || tr == nil || why != "" {
			t.Fatalf("SetupAt(%s, %s) = %v, %q, %v", dir, id, tr, why, err)
		}
		defer tr.Close()
		if tr.Path() != filepath.Join(dir, "tend-"+id) || tr.DaemonGroup() != "" || !slices.Equal(tr.Controllers(), []string{"cpu", "pids"}) {
			t.Errorf("%s: Path %s, DaemonGroup %q, Controllers %v", id, tr.Path(), tr.DaemonGroup(), tr.Controllers())
		}
		if got := f.read(filepath.Join(dir, "cgroup.subtree_control")); got != "+cpu +pids" && len(trees) == 0 {
			t.Errorf("%s/cgroup.subtree_control = %q", dir, got)
		}
		f.group(dir, map[string]string{"cgroup.subtree_control": "cpu pids\n"}) // as the kernel lists it
		f.group(filepath.Join(tr.Path(), "w-0"), map[string]string{"cgroup.procs": ""})
		trees = append(trees, tr)
	}
	for _, tr := range trees {
		if names, err := tr.Names(); err != nil || !slices.Equal(names, []string{"w-0"}) {
			t.Errorf("%s: Names = %v, %v", tr.Path(), names, err)
		}
	}
	if got := f.read(filepath.Join(foreign, "cgroup.procs")); got != "4242\n" {
		t.Errorf("the foreign group was touched: %q", got)
	}
}
