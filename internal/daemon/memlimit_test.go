package daemon

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/tend-sh/tend/internal/testutil"
)

// The limit is what the runtime uses besides the heap, the live heap, and
// headroom: a fifth of the live heap, at least headroomFloor.
func TestMemLimit(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name        string
		other, live uint64
		want        int64
	}{
		{"small daemon: the floor", 5 * mb, 6 * mb, 15 * mb},
		{"ten thousand instances: a fifth", 12 * mb, 60 * mb, 84 * mb},
		{"empty", 0, 0, headroomFloor},
	} {
		if got := memLimit(tc.other, tc.live); got != tc.want {
			t.Errorf("%s: memLimit(%d, %d) = %d, want %d", tc.name, tc.other, tc.live, got, tc.want)
		}
	}
}

// While a daemon runs, every collection sets the limit from what it found
// live; once none runs, the limit is lifted. A GOMEMLIMIT of the
// operator's is left as it is.
func TestLimitFollowsCollections(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	stop := startLimit()
	again := startLimit() // a second daemon in the process
	runtime.GC()
	testutil.Eventually(t, "a limit after a collection", func() bool {
		runtime.GC()
		return debug.SetMemoryLimit(-1) != math.MaxInt64
	})
	other, live := readUse()
	if l := debug.SetMemoryLimit(-1); l < int64(live) || l > memLimit(other, live)+64<<20 {
		t.Errorf("limit %d with %d live and %d other", l, live, other)
	}
	if g := debug.SetGCPercent(-1); g != -1 {
		t.Errorf("GOGC %d while the limit paces the collector", g)
	}
	stop()
	stop() // idempotent
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		t.Error("one daemon's stop lifted the limit of the other")
	}
	again()
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("limit %d once no daemon runs", l)
	}
	if g := debug.SetGCPercent(100); g != 100 {
		t.Errorf("GOGC %d once no daemon runs, want 100 back", g)
	}
	runtime.GC()
	runtime.GC()
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("limit %d set by a collection after the stop", l)
	}

	debug.SetMemoryLimit(1 << 40) // GOMEMLIMIT=1TiB
	stop = startLimit()
	runtime.GC()
	runtime.GC()
	if l := debug.SetMemoryLimit(-1); l != 1<<40 {
		t.Errorf("the operator's limit became %d", l)
	}
	stop()
	if l := debug.SetMemoryLimit(-1); l != 1<<40 {
		t.Errorf("the operator's limit became %d at stop", l)
	}
}

// What the collector may allocate before it must have collected: the
// headroom less the runtime's own margin under a limit.
func TestUsable(t *testing.T) {
	const mb = 1 << 20
	for live, want := range map[uint64]uint64{
		6 * mb:  3 * mb,              // the floor, less 1 MiB
		60 * mb: 12*mb - 72*mb*3/100, // a fifth, less 3% of live and headroom
		0:       3 * mb,
	} {
		if got := usable(live); got != want {
			t.Errorf("usable(%d) = %d, want %d", live, got, want)
		}
	}
}
