// Package broker is the one answer to "is this instance alive and what is it
// doing". Supervisors push a Snapshot after every change; the broker keeps the
// latest per registered instance and derives the full Status (lifecycle, why,
// uptime, turn, process tree) through one pure reducer when asked.
//
// status_changed is published when a change a reader cares about happens
// (state, lifecycle, pid, turn), never for a no-op, and coalesced per
// instance (docs/events.md#status_changed-is-coalesced): at most one each Interval, and the latest state always
// follows within Interval, so a program flipping its notify state in a loop
// costs a few events a second, not one per flip.
//
// The broker never blocks a supervisor (STYLE 7): Update only stores the
// snapshot and marks the instance due under the broker's lock, which no one
// holds across a /proc sample or a write to disk. Run's goroutine alone
// derives (reading the process tree) and publishes status_changed, outside
// the lock; being the only publisher of that kind, it keeps each instance's
// announcements in order.
//
// An id that is not registered is answered as unknown and leaves nothing
// behind: lookups never insert. A list is one consistent snapshot taken under
// the broker's lock: its ids are exactly the registered ones at that moment.
package broker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Tree reads the process tree of a run led by a pid (package proctree).
type Tree interface {
	// Members returns the run's members, how they were found (tracking),
	// their summed RSS and whether the list is truncated; a sample younger
	// than maxAge may be reused.
	Members(leader int, maxAge time.Duration) program.Members
	// Forget drops what is kept for a run that ended.
	Forget(leader int)
}

// How fresh a process tree must be (docs/status.md#how-fresh-the-processes-are):
// a single status reads it anew; an announcement, or a Select, may reuse a
// sample up to a second old; a listing (Listing) answers with the last
// sample of each run whatever its age, and has the runs sampled again
// after its answer. A listing never waits on sampling it could have done
// before: the first `tend ps` after an hour of quiet costs what a warm one
// costs, and an idle daemon still reads nothing. Only a run with no sample
// of its own yet (its announcement's has not been taken) is read in the
// request.
const (
	statusTreeAge = 0
	listTreeAge   = time.Second
	listAnyAge    = time.Duration(math.MaxInt64)
)

// Interval is the least time between two status_changed of one instance.
const Interval = 100 * time.Millisecond

// agentEvery is how often alive agents are looked at again: an agent's turn
// read from its output ends by silence, which no one reports.
const agentEvery = time.Second

// Broker holds the latest snapshot of every registered instance.
type Broker struct {
	publish func(program.Event)
	now     func() time.Time
	tree    Tree          // nil: no process trees
	kick    chan struct{} // something is due, or an agent registered; capacity 1

	mu      sync.Mutex          // guards entries, order, agents and due
	entries map[string]*entry   // by instance id
	order   []*entry            // entries by program then instance; nil: to be sorted again
	agents  map[string]*entry   // the entries that are agents: the only ones whose turn changes on its own
	due     map[*entry]struct{} // entries with a change not announced yet

	refresher refresher    // samples again after a Listing's answer
	serving   atomic.Int32 // lists being derived and written: a refresh waits for them (refresh.go)
	served    atomic.Int64 // when the last list was written (Unix ns, the real clock)
}

type entry struct {
	// snap is never changed once stored (Update stores a new one): a
	// listing copies pointers under the lock and reads them after.
	snap *program.Snapshot
	seen changeKey // what the last status_changed (or registration) said
	last time.Time // when the last status_changed of it was published
	gone bool      // forgotten: a pending announcement is dropped
}

// changeKey is the part of a status whose change is worth an event. It is
// computed from the snapshot alone (no process tree), cheaply, on every
// Update.
type changeKey struct {
	state, lifecycle string
	pid              int
	turn             bool
}

func keyOf(s *program.Status) changeKey {
	k := changeKey{state: s.State, lifecycle: s.Lifecycle, turn: s.TurnActive}
	if s.PID != nil {
		k.pid = *s.PID
	}
	return k
}

// quickKey is keyOf the snapshot's derived status, without deriving the
// rest of it (why, uptime).
func quickKey(s *program.Snapshot, now time.Time) changeKey {
	st := &s.Status
	alive := st.PID != nil
	turn := alive && turnActive(*s, now)
	k := changeKey{state: st.State, turn: turn, lifecycle: Lifecycle(st.State, alive, st.Agent, turn, st.LastExit)}
	if alive {
		k.pid = *st.PID
	}
	return k
}

// New returns an empty Broker. publish receives status_changed events (from
// Run's goroutine); tree (may be nil) reads process trees.
func New(publish func(program.Event), now func() time.Time, tree Tree) *Broker {
	if now == nil {
		now = time.Now
	}
	return &Broker{publish: publish, now: now, tree: tree, kick: make(chan struct{}, 1),
		entries: map[string]*entry{}, agents: map[string]*entry{}, due: map[*entry]struct{}{}}
}

// derive is Derive plus the run's processes, sampled as of now or reused
// from a sample of this run less than maxAge older. State, pid and
// lifecycle are always the snapshot's: only the processes may be older.
func (b *Broker) derive(s *program.Snapshot, now time.Time, maxAge time.Duration) program.Status {
	st := Derive(*s, now)
	if st.PID == nil {
		return st
	}
	run := liveRun{*st.PID, s.Members}
	m, ok := b.sample(run, now, maxAge)
	if ok && maxAge > 0 && m.At.Before(st.StartedAt.Time) {
		// Taken before this run began: an earlier run's (the instance's
		// last, or its leader pid's previous holder). Never shown as this
		// run's: read it now.
		m, ok = b.sample(run, now, 0)
	}
	if ok && len(m.Procs) > 0 {
		st.Processes, st.Tracking, st.RSSBytes, st.Truncated = m.Procs, m.Tracking, m.RSS, m.Truncated
		st.PeakRSS = max(st.PeakRSS, m.Peak)
		st.SampledAt = program.Time{Time: m.At}
	}
	return st
}

// liveRun is what sampling a run needs: its leader, and its snapshot's
// Members (nil: the broker walks the leader's process tree).
type liveRun struct {
	pid     int
	members func(asOf time.Time, maxAge time.Duration) program.Members
}

// sample reads a live run's processes: from its cgroup when the snapshot
// has Members, else from the leader's process tree. false: nothing to read
// them with.
func (b *Broker) sample(r liveRun, asOf time.Time, maxAge time.Duration) (program.Members, bool) {
	switch {
	case r.members != nil:
		return r.members(asOf, maxAge), true
	case b.tree != nil:
		return b.tree.Members(r.pid, maxAge), true
	}
	return program.Members{}, false
}

// Update records an instance's latest snapshot, registering it on first
// sight, and marks it due for status_changed if something a reader cares
// about changed. It does no I/O and never waits for Run.
func (b *Broker) Update(s program.Snapshot) {
	k := quickKey(&s, b.now())
	snap := &s // moved to the heap: one allocation per change, none per listing
	b.mu.Lock()
	e, ok := b.entries[s.Status.ID]
	if !ok {
		e = &entry{snap: snap, seen: k}
		b.entries[s.Status.ID] = e
		b.order = nil
		if s.Status.Agent {
			b.agents[s.Status.ID] = e
			b.poke() // Run may sleep for want of agents
		}
		b.mu.Unlock()
		return
	}
	old := e.snap.Status.PID
	e.snap = snap
	if k != e.seen {
		b.markLocked(e)
	}
	b.mu.Unlock()
	if old != nil && b.tree != nil && (s.Status.PID == nil || *s.Status.PID != *old) {
		b.tree.Forget(*old) // that run has ended
	}
}

// markLocked puts e among the due announcements and wakes Run.
func (b *Broker) markLocked(e *entry) {
	if _, ok := b.due[e]; !ok {
		b.due[e] = struct{}{}
		b.poke()
	}
}

func (b *Broker) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Forget drops an instance; later lookups answer unknown.
func (b *Broker) Forget(id string) {
	b.mu.Lock()
	e, ok := b.entries[id]
	if ok {
		e.gone = true
		delete(b.entries, id)
		b.order = nil
		delete(b.agents, id)
		delete(b.due, e)
	}
	b.mu.Unlock()
	if ok && e.snap.Status.PID != nil && b.tree != nil {
		b.tree.Forget(*e.snap.Status.PID)
	}
}

// Status derives one instance's status; an unknown id wraps
// program.ErrNotFound and is not remembered.
func (b *Broker) Status(id string) (program.Status, error) {
	b.mu.Lock()
	e, ok := b.entries[id]
	var snap *program.Snapshot
	if ok {
		snap = e.snap
	}
	b.mu.Unlock()
	if !ok {
		return program.Status{}, fmt.Errorf("%w: %s", program.ErrNotFound, id)
	}
	return b.derive(snap, b.now(), statusTreeAge), nil
}

// ListBare is List without the process trees (nothing is read from /proc):
// lifecycle, state, pid and why, as cheap as the snapshots themselves.
func (b *Broker) ListBare() []program.Status {
	snaps := b.collect(nil, false, nil)
	now := b.now()
	out := make([]program.Status, len(snaps))
	for i, s := range snaps {
		out[i] = Derive(*s, now)
	}
	return out
}

// Brief is what a readiness check needs of an instance, straight from its
// snapshot: nothing derived, nothing read from /proc.
type Brief struct {
	ID, Program, State string
	Alive, Ready       bool
	Ended              bool // it has a last exit
}

// Briefs lists every registered instance's Brief, sorted by program then
// instance: cheap enough for a readinessProbe polled at ten thousand.
func (b *Broker) Briefs() []Brief {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sortLocked()
	out := make([]Brief, len(b.order))
	for i, e := range b.order {
		st := &e.snap.Status
		out[i] = Brief{ID: st.ID, Program: st.Program, State: st.State, Alive: st.PID != nil, Ready: st.Ready, Ended: st.LastExit != nil}
	}
	return out
}

// Brief is one instance's Brief; false for an unknown id.
func (b *Broker) Brief(id string) (Brief, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[id]
	if !ok {
		return Brief{}, false
	}
	st := &e.snap.Status
	return Brief{ID: st.ID, Program: st.Program, State: st.State, Alive: st.PID != nil, Ready: st.Ready, Ended: st.LastExit != nil}, true
}

// specLabels is a spec's labels (nil for no spec).
func specLabels(s *program.Spec) map[string]string {
	if s == nil {
		return nil
	}
	return s.Labels
}

// sortLocked puts the entries in order again after a registration or a
// Forget: a listing of a steady fleet compares no names.
func (b *Broker) sortLocked() {
	if b.order == nil {
		b.order = make([]*entry, 0, len(b.entries))
		for _, e := range b.entries {
			b.order = append(b.order, e)
		}
		slices.SortFunc(b.order, func(x, y *entry) int {
			if c := strings.Compare(x.snap.Status.Program, y.snap.Status.Program); c != 0 {
				return c
			}
			return x.snap.Status.Instance - y.snap.Status.Instance
		})
	}
}

// Run publishes the due status_changed events, each instance at most once
// per Interval, until ctx ends; once a second it also looks at the alive
// agents, so a turn that starts or ends (output within turn_idle_after, or
// silence) is announced even when the supervisor reports nothing new.
// Without agents or changes it sleeps: a quiet fleet costs no wake-ups.
func (b *Broker) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var nextAgents time.Time
	for {
		agents := b.anyAgents()
		if now := b.now(); agents && !now.Before(nextAgents) {
			b.recheck()
			nextAgents = now.Add(agentEvery)
		}
		wait, ok := b.flush()
		if agents {
			if a := nextAgents.Sub(b.now()); !ok || a < wait {
				wait, ok = a, true
			}
		}
		t.Stop()
		if ok {
			t.Reset(max(wait, time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-t.C:
		}
	}
}

func (b *Broker) anyAgents() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.agents) > 0
}

// flush publishes the due announcements whose Interval has passed and says
// how long until the next one is due (ok false: none is).
func (b *Broker) flush() (wait time.Duration, ok bool) {
	now := b.now()
	type due struct {
		e    *entry
		snap *program.Snapshot
	}
	var ready []due
	b.mu.Lock()
	for e := range b.due {
		if next := e.last.Add(Interval); now.Before(next) {
			if w := next.Sub(now); !ok || w < wait {
				wait, ok = w, true
			}
			continue
		}
		delete(b.due, e)
		if quickKey(e.snap, now) == e.seen {
			continue // changed and changed back: nothing to say
		}
		e.last = now
		ready = append(ready, due{e, e.snap})
	}
	b.mu.Unlock()
	// Derive (reading /proc) and publish outside the lock.
	for _, d := range ready {
		st := b.derive(d.snap, now, listTreeAge)
		b.mu.Lock()
		gone := d.e.gone
		d.e.seen = keyOf(&st)
		b.mu.Unlock()
		if !gone {
			b.publish(program.Event{Kind: program.KindStatusChanged, ID: st.ID, Program: st.Program, Data: &st})
		}
	}
	return wait, ok
}

// recheck marks the alive agents whose turn (or lifecycle) changed on its own.
func (b *Broker) recheck() {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.agents {
		if e.snap.Status.PID != nil && quickKey(e.snap, now) != e.seen {
			b.markLocked(e)
		}
	}
}
