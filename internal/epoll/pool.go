package epoll

import (
	"errors"
	"math"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Pool is a set of loops that grows by one each time every loop's table is
// near the descriptor limit. Its Add places a watch on a loop with room.
type Pool struct {
	mu    sync.Mutex // guards loops
	loops []*Loop
}

var shared Pool

// Shared returns the process's pool, its first loop started on first use:
// like Go's own network poller, one pool serves every caller.
func Shared() (*Pool, error) {
	if _, err := shared.pick(nil); err != nil {
		return nil, err
	}
	return &shared, nil
}

// reserve is what a loop's table keeps free beyond its watches: its own
// few descriptors, those a notify datagram may pass (up to 253, closed at
// once), a file a handler opens for a moment, and Adds under way at once.
const reserve = 320

// room is how many watches a loop's table takes under the current limit.
func room() int64 {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return math.MaxInt64
	}
	limit := int64(min(lim.Cur, math.MaxInt32))
	return max(limit-reserve, limit/2)
}

// Add watches fd on a loop with room, starting a loop if none has; see
// Loop.Add. A loop whose table turns out full (EMFILE) is passed over for
// another.
func (p *Pool) Add(fd int, h Handler, opts ...Option) (*Watch, error) {
	var full []*Loop
	for {
		l, err := p.pick(full)
		if err != nil {
			return nil, err
		}
		w, err := l.Add(fd, h, opts...)
		if err == nil || !l.private || !errors.Is(err, unix.EMFILE) || len(full) >= 2 {
			return w, err
		}
		full = append(full, l)
	}
}

// pick returns the first loop with room, not one of full, starting one if
// there is none. A loop in the process's table is the only one: more would
// not make room.
func (p *Pool) pick(full []*Loop) (*Loop, error) {
	n := room()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.loops {
		if !l.private {
			return l, nil
		}
		if l.load.Load() < n && !slices.Contains(full, l) {
			return l, nil
		}
	}
	l, err := New()
	if err != nil {
		return nil, err
	}
	p.loops = append(p.loops, l)
	return l, nil
}

// LoopStats is one loop of a pool, for tests and diagnostics.
type LoopStats struct {
	TID     int  // the loop's thread: /proc/self/task/TID/fd is its table when Private
	Private bool // the loop has a descriptor table of its own
	Watches int  // descriptors it watches
}

// Stats describes the pool's loops, oldest first.
func (p *Pool) Stats() []LoopStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]LoopStats, len(p.loops))
	for i, l := range p.loops {
		out[i] = LoopStats{TID: l.tid, Private: l.private, Watches: int(l.load.Load())}
	}
	return out
}
