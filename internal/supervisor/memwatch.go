package supervisor

import (
	"sync"
	"sync/atomic"
	"time"
)

// memWatch is the memory watchdog of every instance with max_rss: one
// goroutine samples each run's tree RSS once a second (a thousand instances
// cost one wake-up a second, not a thousand), keeps the figures where the
// instance's report reads them, and tells an instance (through its inbox)
// only when its run passes max_rss.
type memWatch struct {
	tree  Tree
	stop  chan struct{}
	start sync.Once // the sampler starts with the first instance: no max_rss, no wake-ups

	mu    sync.Mutex             // guards insts
	insts map[*Instance]*memSeen // instances whose program has max_rss
}

// memSeen is the sampler's own memory of an instance (sampler goroutine only).
type memSeen struct{ pid int }

// memState is what an instance shares with the sampler.
type memState struct {
	pid  atomic.Int64 // the run to sample; 0 when none (written by the instance)
	peak atomic.Int64 // highest sample of that run (written by the sampler)
}

type memOver struct {
	pid int
	rss int64
}

func newMemWatch(tree Tree) *memWatch {
	return &memWatch{tree: tree, stop: make(chan struct{}), insts: map[*Instance]*memSeen{}}
}

func (w *memWatch) add(in *Instance) {
	w.start.Do(func() { go w.loop() })
	w.mu.Lock()
	w.insts[in] = &memSeen{}
	w.mu.Unlock()
}

func (w *memWatch) remove(in *Instance) {
	w.mu.Lock()
	delete(w.insts, in)
	w.mu.Unlock()
}

func (w *memWatch) close() { close(w.stop) }

func (w *memWatch) loop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.sample()
		}
	}
}

func (w *memWatch) sample() {
	w.mu.Lock()
	insts := make(map[*Instance]*memSeen, len(w.insts))
	for in, seen := range w.insts {
		insts[in] = seen
	}
	w.mu.Unlock()
	for in, seen := range insts {
		m := &in.mem
		pid := int(m.pid.Load())
		if pid == 0 {
			continue
		}
		if pid != seen.pid { // a new run: its peak starts over
			seen.pid = pid
			m.peak.Store(0)
		}
		rss := in.memSample(pid)
		if rss > m.peak.Load() {
			m.peak.Store(rss)
		}
		if rss > in.spec.MaxRSS {
			in.putOver(memOver{pid: pid, rss: rss}) // replaces one not yet taken
		}
	}
}
