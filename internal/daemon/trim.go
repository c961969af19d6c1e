package daemon

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory trimming. Go's runtime keeps the heap it grew for a burst (a big
// start, a crash storm, a flurry of listings from dashboards) for the next
// one: up to twice the live heap, for good, in a daemon that may then sit
// idle for hours. So every event and every API request pokes a timer, and
// once the daemon has been quiet for trimAfter, it compares the heap it
// holds with the heap it uses; when it holds much more, it collects and
// hands the rest back (two collections, a few milliseconds, once per
// burst). An idle daemon is never woken for this.
const (
	trimAfter = 2 * time.Second
	// trimExcess is what held beyond the live heap (and beyond an eighth of
	// it) is worth handing back: under the memory limit's floor (4 MiB,
	// less the runtime's 1 MiB) a small daemon holds up to 3 MiB after a
	// burst, which the trim must catch.
	trimExcess = 2 << 20
	// trimShare is under the memory limit's headroom (memlimit.go: a fifth
	// of the live heap): a heap held at the limit after a burst is trimmed
	// once quiet, not kept up to that headroom for good.
	trimShare = 8
)

// shouldTrim decides from the heap held (objects live or dead, and free
// spans not yet returned; right after a trim that is the live heap, so a
// trim cannot repeat itself) and the live heap at the last collection. It
// is pure, for tests.
func shouldTrim(held, live uint64) bool {
	if held <= live {
		return false
	}
	excess := held - live
	return excess >= trimExcess && excess >= live/trimShare
}

// trimmer runs trim once the pokes stop for trimAfter. Its timer is safe
// for concurrent use, so poke needs no lock.
// It also keeps the memory limit (memlimit.go) while the daemon runs.
type trimmer struct {
	timer     *time.Timer
	stopLimit func()
}

func newTrimmer() *trimmer {
	t := &trimmer{stopLimit: startLimit()}
	t.timer = time.AfterFunc(trimAfter, trim) // the start is a burst of its own
	return t
}

// poke says the daemon is busy: trim no sooner than trimAfter from now.
func (t *trimmer) poke() { t.timer.Reset(trimAfter) }

func (t *trimmer) stop() {
	t.timer.Stop()
	t.stopLimit()
}

func trim() {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	if !shouldTrim(s[0].Value.Uint64()+s[1].Value.Uint64(), s[2].Value.Uint64()) {
		return
	}
	// Two collections: the first only moves sync.Pool contents (encoding/json
	// keeps its grown buffers there) to the pools' victim caches; the
	// second frees them, and FreeOSMemory hands the free spans back.
	runtime.GC()
	debug.FreeOSMemory()
}
