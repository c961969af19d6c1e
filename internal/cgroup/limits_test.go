package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// limitsCases are, for each knob, a program spec that sets it and what
// Prepare writes into the run's group for it. A knob without a case fails
// TestLimitsEveryKnobHasACase.
var limitsCases = []struct {
	spec program.Spec
	file string // the group's file
	want string // its content
}{
	{program.Spec{MemoryMax: 256 << 20}, "memory.max", "268435456"},
}

func TestLimitsEveryKnobHasACase(t *testing.T) {
	for _, k := range knobs {
		found := false
		for _, c := range limitsCases {
			found = found || c.file == k.file
		}
		if !found {
			t.Errorf("knob %s (%s) has no case in limitsCases", k.key, k.file)
		}
	}
}

// allOn is a fake tree with every wanted controller on, and a group in it
// with an empty file for each knob (a fake file system has no kernel to
// make them).
func allOn(t *testing.T) (*fakeFS, *Tree, string) {
	f := newFake(t)
	dir := filepath.Join(f.root, "all")
	f.group(dir, map[string]string{"cgroup.procs": "", "cgroup.controllers": "cpu memory pids\n", "cgroup.subtree_control": "cpu memory pids\n"})
	f.subtree(dir, "x")
	tr, _, err := SetupAt(dir, "x", f.mountinfo, f.self)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	g := filepath.Join(tr.Path(), "w-0")
	for _, k := range knobs {
		f.write(filepath.Join(g, k.file), "")
	}
	return f, tr, g
}

// Each knob's limit, taken from the spec, is written to its file; a limit
// of 0 is written "max", so that one taken out of the config is lifted.
func TestLimitsWritten(t *testing.T) {
	f, tr, g := allOn(t)
	for _, c := range limitsCases {
		l := LimitsOf(&c.spec)
		if rs := Unenforceable(tr, "", l); len(rs) != 0 {
			t.Errorf("%s: refused with every controller on: %v", c.file, rs)
		}
		if err := tr.writeLimits(g, l); err != nil {
			t.Fatal(err)
		}
		if got := f.read(filepath.Join(g, c.file)); got != c.want {
			t.Errorf("%s = %q, want %q", c.file, got, c.want)
		}
		f.write(filepath.Join(g, c.file), "") // the kernel takes each write whole; a plain file needs emptying
		if err := tr.writeLimits(g, Limits{}); err != nil {
			t.Fatal(err)
		}
		if got := f.read(filepath.Join(g, c.file)); got != "max" {
			t.Errorf("%s without a limit = %q, want max", c.file, got)
		}
	}
}

// Where a knob's controller is off, or runs get no cgroup, the limit is
// refused with the reason, under its config key; Prepare refuses it too,
// before making anything, so no run starts without its limit.
func TestLimitsRefused(t *testing.T) {
	f := newFake(t)
	dir := filepath.Join(f.root, "none")
	f.group(dir, map[string]string{"cgroup.procs": "", "cgroup.controllers": "", "cgroup.subtree_control": ""})
	f.subtree(dir, "x")
	bare, _, err := SetupAt(dir, "x", f.mountinfo, f.self)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	for _, c := range limitsCases {
		l := LimitsOf(&c.spec)
		var key string
		for _, k := range knobs {
			if k.file == c.file {
				key = k.key
			}
		}
		rs := Unenforceable(bare, "", l)
		if len(rs) != 1 || rs[0].Key != key || rs[0].Why == "" {
			t.Errorf("%s on a tree without controllers: %v", key, rs)
		}
		rs = Unenforceable(nil, `cgroup = "off"`, l)
		if len(rs) != 1 || rs[0].Key != key || rs[0].Why != `runs get no cgroup (cgroup = "off")` {
			t.Errorf("%s without cgroups: %v", key, rs)
		}
		g := bare.Group("w-0")
		if fd, err := g.Prepare(l); err == nil || !strings.Contains(err.Error(), key+" cannot be enforced here: ") {
			fd.Close()
			t.Errorf("Prepare(%+v) = %v, want a refusal", l, err)
		}
		if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
			t.Errorf("the refused Prepare made %s: %v", g.Path(), err)
		}
	}
	if rs := Unenforceable(bare, "", Limits{}); len(rs) != 0 {
		t.Errorf("no limits refused: %v", rs)
	}
	if rs := Unenforceable(nil, "x", Limits{}); len(rs) != 0 {
		t.Errorf("no limits refused without cgroups: %v", rs)
	}
}

// The memory controller bound to a v1 hierarchy (this host's case): the
// refusal says so.
func TestLimitsMemoryOnV1(t *testing.T) {
	f := newFake(t)
	dir := filepath.Join(f.root, "tend")
	f.group(dir, map[string]string{"cgroup.procs": "", "cgroup.controllers": "cpu pids\n", "cgroup.subtree_control": ""})
	f.subtree(dir, "x")
	tr, _, err := SetupAt(dir, "x", f.mountinfo, f.self)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rs := Unenforceable(tr, "", Limits{MemoryMax: 1 << 30})
	if len(rs) != 1 || rs[0] != (Refusal{"memory_max", "no memory controller: it is bound to the cgroup v1 hierarchy at /sys/fs/cgroup/memory"}) {
		t.Errorf("Unenforceable = %+v", rs)
	}
}

func TestLimitsNegative(t *testing.T) {
	_, tr, _ := allOn(t)
	if _, err := tr.Group("w-0").Prepare(Limits{MemoryMax: -1}); err == nil || !strings.Contains(err.Error(), "negative memory_max -1") {
		t.Errorf("Prepare of a negative limit: %v", err)
	}
}
