package broker

import (
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/parallel"
	"github.com/tend-sh/tend/internal/program"
)

// List is one consistent snapshot of the instances a listing selected: the
// pointers to their snapshots, taken under the broker's lock, sorted by
// program then instance. Statuses are derived from it one at a time, as
// they are written out, so a listing of ten thousand never holds ten
// thousand statuses (nor copies of their snapshots) at once.
type List struct {
	b      *Broker
	snaps  []*program.Snapshot
	now    time.Time     // computed_at of every status, and the samples' asOf
	maxAge time.Duration // how old a reused process sample may be
	sel    selection
	kept   *[]*program.Snapshot // snaps' array, back to listPool after
}

// Len is how many instances the list holds.
func (l *List) Len() int { return len(l.snaps) }

// Status derives the list's i-th status. It is safe to call from several
// goroutines at once (for different or the same i).
func (l *List) Status(i int) program.Status {
	return l.b.derive(l.snaps[i], l.now, l.maxAge)
}

// Written is to be called once the list's answer is written; the list is
// not to be used after it. It has the runs of the list whose samples are
// older than listTreeAge sampled again, in the background (refresh.go).
func (l *List) Written() {
	l.b.refresher.ask(l.b, l.sel)
	l.release()
}

func (l *List) release() {
	l.b.served.Store(time.Now().UnixNano())
	l.b.serving.Add(-1)
	clear(l.snaps) // keep no snapshot of the past alive
	*l.kept = l.snaps[:0]
	listPool.Put(l.kept)
	l.snaps = nil
}

// listPool holds the arrays of finished lists.
var listPool = sync.Pool{New: func() any { return new([]*program.Snapshot) }}

// Listing is the list of the instances that match (agentsOnly keeps the
// agents, labels those whose program has all of them), answered without
// waiting for /proc: each status reuses the last sample of its run's
// processes whatever its age (only a run with no sample of its own is
// sampled as it is derived), and says in sampled_at when it was taken.
// Call Written once the answer is out: the next call then finds the
// samples fresh. A daemon nobody asks samples nothing.
func (b *Broker) Listing(agentsOnly bool, labels program.LabelSelector) *List {
	return b.list(selection{agentsOnly, labels}, listAnyAge)
}

func (b *Broker) list(sel selection, maxAge time.Duration) *List {
	b.serving.Add(1)
	kept := listPool.Get().(*[]*program.Snapshot)
	snaps := b.collect((*kept)[:0], sel.agentsOnly, sel.labels)
	return &List{b: b, snaps: snaps, now: b.now(), maxAge: maxAge, sel: sel, kept: kept}
}

// List derives every registered instance's status from one snapshot of the
// registry, sorted by program then instance; agentsOnly keeps agents.
func (b *Broker) List(agentsOnly bool) []program.Status {
	return b.Select(agentsOnly, nil)
}

// Select is List of the instances whose program's labels match labels:
// the others are left out before anything is derived or read from /proc,
// so a selection costs what its matches cost. Process samples up to
// listTreeAge old are reused, and nothing is refreshed afterwards.
func (b *Broker) Select(agentsOnly bool, labels program.LabelSelector) []program.Status {
	l := b.list(selection{agentsOnly, labels}, listTreeAge)
	defer l.release()
	out := make([]program.Status, l.Len())
	// Deriving reads each run's processes from /proc and its cgroup: small
	// blocking reads, most of a listing of ten thousand, shared by the cores.
	parallel.Each(len(out), 256, func(i int) { out[i] = l.Status(i) })
	return out
}

// collect appends to dst the snapshots of the registered instances that
// match, under the lock, sorted by program then instance.
func (b *Broker) collect(dst []*program.Snapshot, agentsOnly bool, labels program.LabelSelector) []*program.Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sortLocked()
	if len(labels) == 0 && cap(dst) < len(b.order) { // a selection is usually a few of many
		dst = make([]*program.Snapshot, 0, len(b.order))
	}
	for _, e := range b.order {
		if (!agentsOnly || e.snap.Status.Agent) && (len(labels) == 0 || labels.Matches(specLabels(e.snap.Spec))) {
			dst = append(dst, e.snap)
		}
	}
	return dst
}
