package cgroup

import (
	"path/filepath"
	"testing"
)

// BenchmarkMemoryRead measures one read of a memory.current-shaped file of
// a real group, as the max_rss watchdog will do per instance each
// interval. memory.current itself is absent on this machine (the memory
// controller is bound to v1), so the same-shaped files that exist are
// read: cgroup.freeze, a single number like memory.current, and cpu.stat,
// a keyed file like memory.events and memory.stat. "kept" is how
// MemoryCurrent reads (pread of a descriptor the Tree keeps open), "open"
// is open, read and close each time (how Memory reads). Also: cgroup.events
// as Populated reads it, and Memory() on a fake cgroupfs (tmpfs, not
// kernfs: its four files, for the allocations more than the time).
func BenchmarkMemoryRead(b *testing.B) {
	tr := testTree(b)
	g := tr.Group("bench-0")
	f, err := g.Prepare(Limits{})
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	for _, name := range []string{"cgroup.freeze", "cpu.stat"} {
		parse := func(data []byte) error {
			if name == "cpu.stat" {
				_, _, err := keyed(data, "usage_usec")
				return err
			}
			_, err := parseBytes(data)
			return err
		}
		b.Run("kept="+name, func(b *testing.B) {
			var buf [1024]byte
			b.ReportAllocs()
			for b.Loop() {
				data, err := tr.kept.read(g.Path(), name, buf[:])
				if err == nil {
					err = parse(data)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("open="+name, func(b *testing.B) {
			file := filepath.Join(g.Path(), name)
			var buf [1024]byte
			b.ReportAllocs()
			for b.Loop() {
				data, err := readSmall(file, buf[:])
				if err == nil {
					err = parse(data)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
		fk.subtree(dir, "x")
		ft, _, err := SetupAt(dir, "x", fk.mountinfo, fk.self)
		if err != nil {
			b.Fatal(err)
		}
		defer ft.Close()
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
