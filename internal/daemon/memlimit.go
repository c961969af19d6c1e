package daemon

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The memory limit. Go's collector lets the heap grow to twice what was
// live at the last collection (GOGC 100) before it collects again: a
// daemon whose fleet keeps 60 MB live may reach 120 MB during a burst of
// listings or restarts that needs a few. So after every collection the
// daemon sets a soft memory limit (debug.SetMemoryLimit) at what the
// runtime uses besides the heap, plus the live heap, plus headroom: a
// fifth of the live heap, at least headroomFloor (a quarter put the start of
// 10,000 instances at 120 MiB of PSS, the target, where a fifth keeps it at
// 118 for no measurable cost in its time). The floor is 4 MiB, not 2:
// under a limit the runtime keeps 1 MiB of the headroom to itself, so a
// 2 MiB floor left a small daemon (1,000 instances, some 7 MiB live)
// collecting after every MiB allocated, which cost the start of 1,000
// instances some 250 ms of CPU (40 %) for 6 MiB of peak PSS; at 4 MiB it
// collects a third as often, and the trim (trim.go) hands back what the
// floor leaves held once the daemon is quiet. The collector then runs
// once a burst has allocated the headroom, and the runtime hands back to
// the system what lies above the limit. The limit follows the live heap:
// as a fleet grows it rises after each collection (a heap that outgrows it
// costs one early collection, never a collector running without end), and
// it falls as the fleet shrinks. An operator's GOMEMLIMIT is left alone.
//
// The limit alone paces the collector: GOGC is off while it is kept (a
// first limit is set at start, since then nothing else would start a
// collection). The limit's headroom is far under GOGC's, so GOGC never
// started a collection anyway; off, it also stops Go's forced collection
// of a heap left untouched for two minutes, which at 10,000 instances was
// most of an idle daemon's CPU (docs/daemon.md#what-wakes-an-idle-daemon).
// An operator's GOGC is left alone too.
const (
	headroomFloor = 4 << 20
	headroomShare = 5 // headroom is the live heap over this, at least the floor
)

// memLimit is the limit for a runtime using other bytes besides its heap
// with live bytes of heap live. It is pure, for tests.
func memLimit(other, live uint64) int64 {
	return int64(other + live + max(headroomFloor, live/headroomShare))
}

// limiter sets the limit after every collection while any daemon of the
// process runs (tests run several).
var limiter struct {
	mu    sync.Mutex // guards the rest
	users int        // daemons running; 0: the limit is off
	armed bool       // a sentinel waits for the next collection
	gogc  int        // GOGC as it was, while the limit turned it off; 0: not turned off
}

// startLimit begins setting the limit after each collection, unless the
// operator set GOMEMLIMIT; the returned func stops it (and lifts the limit
// once no daemon needs it).
func startLimit() (stop func()) {
	limiter.mu.Lock()
	defer limiter.mu.Unlock()
	if limiter.users == 0 && debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return func() {} // GOMEMLIMIT: the operator's
	}
	if limiter.users == 0 {
		debug.SetMemoryLimit(memLimit(readUse()))
		if os.Getenv("GOGC") == "" {
			limiter.gogc = debug.SetGCPercent(-1)
		}
	}
	if !limiter.armed {
		armLimit()
	}
	limiter.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			limiter.mu.Lock()
			defer limiter.mu.Unlock()
			if limiter.users--; limiter.users == 0 {
				if limiter.gogc != 0 { // first: no moment with neither a limit nor GOGC
					debug.SetGCPercent(limiter.gogc)
					limiter.gogc = 0
				}
				debug.SetMemoryLimit(math.MaxInt64)
			}
		})
	}
}

// sentinel is an object that lives until the next collection: its cleanup
// runs after it, sets the limit and makes the next sentinel. It holds a
// pointer, so the allocator never packs it with other small objects.
type sentinel struct{ _ *byte }

func armLimit() {
	limiter.armed = true
	runtime.AddCleanup(new(sentinel), func(struct{}) { afterCollection() }, struct{}{})
}

// afterCollection sets the limit from the collection that just ended, and
// waits for the next one, while a daemon runs.
func afterCollection() {
	limiter.mu.Lock()
	defer limiter.mu.Unlock()
	limiter.armed = false
	if limiter.users == 0 {
		return // stopped: the next start arms again
	}
	debug.SetMemoryLimit(memLimit(readUse()))
	armLimit()
}

// readUse reads what the runtime maps besides heap objects and free heap
// pages (stacks, the collector's metadata, fragmentation), and the heap
// live at the last collection.
func readUse() (other, live uint64) {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	total, released, free, objects := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
	if used := released + free + objects; total > used {
		other = total - used
	}
	return other, s[4].Value.Uint64()
}

// collectAfterBurst collects now, once a listing has been answered and its
// samples refreshed (the broker's AfterRefresh), when what was allocated
// since the last collection is over a quarter of the headroom the
// collector leaves itself under the limit: the next listing, likely
// seconds away,
// then finds it free instead of paying for a collection in the middle of
// its answer. Nothing while no daemon keeps the limit (an operator's
// GOMEMLIMIT).
func collectAfterBurst() {
	limiter.mu.Lock()
	on := limiter.users > 0
	limiter.mu.Unlock()
	if !on {
		return
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(); objects > live && objects-live > usable(live)/4 {
		runtime.GC()
	}
}

// usable is how much of the headroom over live bytes the collector lets a
// program allocate before it must have collected: the runtime keeps 3% of
// its goal under a memory limit (at least 1 MiB) to itself.
func usable(live uint64) uint64 {
	headroom := max(headroomFloor, live/headroomShare)
	margin := max(1<<20, (live+headroom)*3/100)
	if headroom <= margin {
		return headroom / 2
	}
	return headroom - margin
}
