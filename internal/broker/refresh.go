package broker

import (
	"slices"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Refreshing after the answer (stale-while-revalidate). A listing answers
// from the process samples it finds, whatever their age, and once its
// answer is written the runs it listed are sampled again, so the next
// listing finds them fresh: cold listings cost what warm ones do, and the
// sampling, three file reads a run, happens while nobody waits for it.
// Nothing is sampled unless a listing asked: an idle daemon does no I/O.

// selection is what a listing asked for.
type selection struct {
	agentsOnly bool
	labels     program.LabelSelector
}

// everything is the selection of every instance.
var everything = selection{}

func (s selection) same(o selection) bool {
	return s.agentsOnly == o.agentsOnly && slices.Equal(s.labels, o.labels)
}

// refresher runs the refreshes listings ask for, one at a time, on a
// goroutine that exists only while there is one to run. A refresh asked
// for while one runs is run after it; two different selections waiting
// merge into every instance. Within listTreeAge of a refresh of every
// instance, none is needed: back-to-back listings ask for one each.
type refresher struct {
	mu      sync.Mutex // guards pending, waiting, running, lastAll and after
	pending selection
	waiting bool      // pending is to be run
	running bool      // the goroutine is there
	lastAll time.Time // when the last refresh of every instance began
	after   func()    // AfterRefresh's

	done sync.WaitGroup // the goroutine, for tests
}

// ask has the runs of sel sampled again, after whatever refresh is running.
func (r *refresher) ask(b *Broker, sel selection) {
	now := b.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastAll.IsZero() && now.Sub(r.lastAll) < listTreeAge {
		return // every sample is younger than that, or being taken
	}
	switch {
	case !r.waiting:
		r.pending, r.waiting = sel, true
	case !r.pending.same(sel):
		r.pending = everything
	}
	if !r.running {
		r.running = true
		r.done.Add(1)
		go r.loop(b)
	}
}

func (r *refresher) loop(b *Broker) {
	defer r.done.Done()
	for {
		r.mu.Lock()
		sel, ok := r.pending, r.waiting
		r.pending, r.waiting = selection{}, false
		if !ok {
			r.running = false
			r.mu.Unlock()
			return
		}
		if sel.same(everything) {
			r.lastAll = b.now()
		}
		after := r.after
		r.mu.Unlock()
		b.refresh(sel)
		if after != nil {
			after()
		}
	}
}

// AfterRefresh sets fn to be called after each refresh, on its goroutine,
// when the listing and its sampling are done and the next request is
// likely seconds away: the daemon collects its garbage there.
func (b *Broker) AfterRefresh(fn func()) {
	b.refresher.mu.Lock()
	b.refresher.after = fn
	b.refresher.mu.Unlock()
}

// refresh samples again the live runs of sel whose samples are older than
// listTreeAge (those a listing would sample itself). It uses one core, and
// steps aside while lists are being asked for: back-to-back calls (an
// operator's, a poller's) do not share the machine with ten thousand reads
// and the collections their garbage brings; the reads go on once the calls
// pause.
func (b *Broker) refresh(sel selection) {
	for _, r := range b.liveRuns(sel) {
		b.yieldToLists()
		b.sample(r, b.now(), listTreeAge) // as of now: a refresh that stepped aside may take a while
	}
}

// listYield bounds how long a refresh waits for lists before it reads its
// next run: lists one after the other without a pause slow the refresh
// down to a run each listYield, never stop it. listGap is the pause after
// a list that says the calls have stopped for now.
var (
	listYield = 50 * time.Millisecond
	listGap   = 100 * time.Millisecond
)

// yieldToLists waits, up to listYield, while a list is being written or
// was written less than listGap ago.
func (b *Broker) yieldToLists() {
	for deadline := time.Now().Add(listYield); b.listsBusy() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func (b *Broker) listsBusy() bool {
	return b.serving.Load() > 0 || time.Since(time.Unix(0, b.served.Load())) < listGap
}

// liveRuns lists the live runs of sel, taken under the lock: a refresh of
// ten thousand copies no more than what sampling them needs.
func (b *Broker) liveRuns(sel selection) []liveRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sortLocked()
	var runs []liveRun
	if len(sel.labels) == 0 {
		runs = make([]liveRun, 0, len(b.order))
	}
	for _, e := range b.order {
		st := &e.snap.Status
		if st.PID != nil && (!sel.agentsOnly || st.Agent) && (len(sel.labels) == 0 || sel.labels.Matches(specLabels(e.snap.Spec))) {
			runs = append(runs, liveRun{*st.PID, e.snap.Members})
		}
	}
	return runs
}
