package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// Nested says whether any run made a group below its own, from the tree's
// directory alone; until one does, TopProcs (one file) is every process of
// a run, as Procs is. One answer serves every call with the same asOf.
func TestRealNested(t *testing.T) {
	tr := testTree(t)
	flat, nest := tr.Group("flat-0"), tr.Group("nest-0")
	rf := startIn(t, flat, nil, `sleep 1000 & exec sleep 1000`)
	asOf := time.Now()
	if tr.Nested(asOf) {
		t.Fatal("Nested with no group below an instance's")
	}
	testutil.Eventually(t, "two sleeps in flat-0", func() bool {
		pids, _ := flat.Procs()
		rf.see(pids)
		return len(pids) == 2 && comm(pids[0]) == "sleep" && comm(pids[1]) == "sleep"
	})
	top, err := flat.TopProcs()
	all, _ := flat.Procs()
	if err != nil || !slices.Equal(top, all) {
		t.Errorf("TopProcs %v (%v), Procs %v: want the same", top, err, all)
	}

	rn := startIn(t, nest, []string{"CG=" + nest.Path()},
		`mkdir "$CG/inner" && sh -c 'echo $$ > "$CG/inner/cgroup.procs" && exec sleep 1000' & exec sleep 1000`)
	testutil.Eventually(t, "a sleep in nest-0/inner", func() bool {
		inner, _ := os.ReadFile(filepath.Join(nest.Path(), "inner", "cgroup.procs"))
		pids, _ := nest.Procs()
		rn.see(pids)
		return len(inner) > 0 && len(pids) == 2
	})
	if tr.Nested(asOf) {
		t.Error("Nested read again for the same asOf")
	}
	if !tr.Nested(time.Now()) {
		t.Error("Nested misses nest-0/inner")
	}
	top, _ = nest.TopProcs()
	all, _ = nest.Procs()
	if len(top) != 1 || len(all) != 2 {
		t.Errorf("nest-0: TopProcs %v, Procs %v; want the leader alone, and both", top, all)
	}
}
