// Package broker is the one answer to "is this instance alive and what is it
// doing". Supervisors push a Snapshot after every change; the broker keeps the
// latest per registered instance and derives the full Status (lifecycle, why,
// uptime, turn) through one pure reducer when asked. It publishes
// status_changed when a change a reader cares about happens (state,
// lifecycle, pid, turn, process count), never for a no-op.
//
// An id that is not registered is answered as unknown and leaves nothing
// behind: lookups never insert. A list is one consistent snapshot taken under
// the broker's lock: its ids are exactly the registered ones at that moment.
package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Tree reads the process tree of a run led by a pid (package proctree).
type Tree interface {
	// Sample returns the run's members, how they were found (tracking) and
	// their summed RSS; a sample younger than maxAge may be reused.
	Sample(leader int, maxAge time.Duration) ([]program.Process, string, int64)
	// Forget drops what is kept for a run that ended.
	Forget(leader int)
}

// How fresh a process tree must be: a single status reads it anew, a list of
// a thousand may reuse samples up to a second old.
const (
	statusTreeAge = 0
	listTreeAge   = time.Second
)

// Broker holds the latest snapshot of every registered instance.
type Broker struct {
	publish func(program.Event)
	now     func() time.Time
	tree    Tree          // nil: no process trees
	kick    chan struct{} // an agent registered; capacity 1

	mu      sync.Mutex        // guards entries and agents
	entries map[string]*entry // by instance id
	agents  map[string]*entry // the entries that are agents: the only ones whose turn changes on its own
}

type entry struct {
	snap program.Snapshot
	seen changeKey // what the last status_changed (or registration) said
}

// changeKey is the part of a status whose change is worth an event.
type changeKey struct {
	state, lifecycle string
	pid              int
	turn             bool
	procs            int
}

func keyOf(s *program.Status) changeKey {
	k := changeKey{state: s.State, lifecycle: s.Lifecycle, turn: s.TurnActive, procs: len(s.Processes)}
	if s.PID != nil {
		k.pid = *s.PID
	}
	return k
}

// New returns an empty Broker. publish receives status_changed events; tree
// (may be nil) reads process trees.
func New(publish func(program.Event), now func() time.Time, tree Tree) *Broker {
	if now == nil {
		now = time.Now
	}
	return &Broker{publish: publish, now: now, tree: tree, kick: make(chan struct{}, 1),
		entries: map[string]*entry{}, agents: map[string]*entry{}}
}

// derive is Derive plus the run's process tree.
func (b *Broker) derive(s program.Snapshot, now time.Time, maxAge time.Duration) program.Status {
	st := Derive(s, now)
	if b.tree != nil && st.PID != nil {
		procs, tracking, rss := b.tree.Sample(*st.PID, maxAge)
		if len(procs) > 0 {
			st.Processes, st.Tracking, st.RSSBytes = procs, tracking, rss
		}
	}
	return st
}

// Update records an instance's latest snapshot, registering it on first
// sight, and publishes status_changed if something a reader cares about
// changed.
func (b *Broker) Update(s program.Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[s.Status.ID]
	st := b.derive(s, b.now(), statusTreeAge)
	k := keyOf(&st)
	if !ok {
		e = &entry{snap: s, seen: k}
		b.entries[s.Status.ID] = e
		if s.Status.Agent {
			b.agents[s.Status.ID] = e
			select { // wake Run if it sleeps for want of agents
			case b.kick <- struct{}{}:
			default:
			}
		}
		return
	}
	if old := e.snap.Status.PID; old != nil && b.tree != nil && (s.Status.PID == nil || *s.Status.PID != *old) {
		b.tree.Forget(*old) // that run has ended
	}
	e.snap = s
	b.announceLocked(e, &st, k)
}

// announceLocked publishes status_changed if k differs from what was last
// announced for e.
func (b *Broker) announceLocked(e *entry, st *program.Status, k changeKey) {
	if k != e.seen {
		e.seen = k
		b.publish(program.Event{Kind: program.KindStatusChanged, ID: st.ID, Program: st.Program, Data: st})
	}
}

// Forget drops an instance; later lookups answer unknown.
func (b *Broker) Forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[id]; ok && e.snap.Status.PID != nil && b.tree != nil {
		b.tree.Forget(*e.snap.Status.PID)
	}
	delete(b.entries, id)
	delete(b.agents, id)
}

// Status derives one instance's status; an unknown id wraps
// program.ErrNotFound and is not remembered.
func (b *Broker) Status(id string) (program.Status, error) {
	b.mu.Lock()
	e, ok := b.entries[id]
	var snap program.Snapshot
	if ok {
		snap = e.snap
	}
	b.mu.Unlock()
	if !ok {
		return program.Status{}, fmt.Errorf("%w: %s", program.ErrNotFound, id)
	}
	return b.derive(snap, b.now(), statusTreeAge), nil
}

// List derives every registered instance's status from one snapshot of the
// registry, sorted by program then instance; agentsOnly keeps agents.
func (b *Broker) List(agentsOnly bool) []program.Status {
	b.mu.Lock()
	snaps := make([]program.Snapshot, 0, len(b.entries))
	for _, e := range b.entries {
		if !agentsOnly || e.snap.Status.Agent {
			snaps = append(snaps, e.snap)
		}
	}
	b.mu.Unlock()
	now := b.now()
	out := make([]program.Status, len(snaps))
	for i := range snaps {
		out[i] = b.derive(snaps[i], now, listTreeAge)
	}
	slices.SortFunc(out, func(a, b program.Status) int {
		if c := strings.Compare(a.Program, b.Program); c != 0 {
			return c
		}
		return a.Instance - b.Instance
	})
	return out
}

// Run re-derives the alive agents once a second until ctx ends, so a turn
// that starts or ends (output within turn_idle_after, or silence) is
// announced by status_changed even when the supervisor reports nothing new.
// Without agents it sleeps: a fleet of plain workers costs no wake-ups.
func (b *Broker) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if !b.anyAgents() {
			t.Stop()
			select {
			case <-b.kick:
				t.Reset(time.Second)
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.recheck()
		}
	}
}

func (b *Broker) anyAgents() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.agents) > 0
}

// recheck re-derives every alive agent and announces the ones that changed.
func (b *Broker) recheck() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for _, e := range b.agents {
		if e.snap.Status.PID == nil {
			continue
		}
		st := b.derive(e.snap, now, listTreeAge)
		b.announceLocked(e, &st, keyOf(&st))
	}
}
