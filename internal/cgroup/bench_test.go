package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkMemoryRead measures one read of a memory.current-shaped file of
// a real group, as the max_rss watchdog will do per instance: the code of
// MemoryCurrent (open, read, close, parse) on a single-number file, and a
// keyed file's read. memory.current itself is absent on this machine (the
// memory controller is bound to v1), so it reads cgroup.freeze (a single
// number, like memory.current), cpu.stat (keyed, like memory.events or
// memory.stat) and cgroup.events (what Populated reads); pids.current where
// the pids controller is enabled. The last case is Memory() on a fake
// cgroupfs (tmpfs, not kernfs): the four files of a full reading.
func BenchmarkMemoryRead(b *testing.B) {
	tr := testTree(b)
	g := tr.Group("bench-0")
	f, err := g.Prepare(0)
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	single := func(name string) func(b *testing.B) {
		return func(b *testing.B) {
			file := filepath.Join(g.Path(), name)
			if _, err := os.Stat(file); err != nil {
				b.Skip(err)
			}
			var buf [32]byte
			b.ReportAllocs()
			for b.Loop() {
				if _, err := readBytes(file, buf[:]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("single=cgroup.freeze", single("cgroup.freeze"))
	b.Run("single=pids.current", single("pids.current"))
	b.Run("keyed=cpu.stat", func(b *testing.B) {
		file := filepath.Join(g.Path(), "cpu.stat")
		var buf [1024]byte
		b.ReportAllocs()
		for b.Loop() {
			data, err := readSmall(file, buf[:])
			if err != nil {
				b.Fatal(err)
			}
			if _, ok, err := keyed(data, "usage_usec"); !ok || err != nil {
				b.Fatal("no usage_usec", err)
			}
		}
	})
	b.Run("populated=cgroup.events", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Populated(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fake=Memory", func(b *testing.B) {
		fk := newFake(b)
		dir := filepath.Join(fk.root, "tend")
		fk.group(dir, map[string]string{"cgroup.procs": "", "cgroup.controllers": "memory\n", "cgroup.subtree_control": "memory\n"})
		ft, _, err := SetupAt(dir, "x", fk.mountinfo, fk.self)
		if err != nil {
			b.Fatal(err)
		}
		fg := ft.Group("web-0")
		fk.group(fg.Path(), map[string]string{"memory.current": "1234567\n", "memory.peak": "7654321\n", "memory.max": "max\n",
			"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fg.Memory(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
