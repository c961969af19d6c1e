package apitest

import (
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/program"
)

// Events is a fake api.Events: an in-memory numbered log with live
// subscribers. Like the daemon's, it never blocks a publisher: a subscriber
// whose buffer is full is cut off.
type Events struct {
	// Buffer is each subscriber's channel capacity; set it before the first
	// Subscribe. 0 means 1024.
	Buffer int

	mu   sync.Mutex      // guards log and subs
	log  []program.Event // every event, seq 1, 2, ...
	subs map[*sub]bool
}

// Publish appends an event with the next seq and fans it out; it returns
// the event.
func (ev *Events) Publish(kind, id string, data any) program.Event {
	return ev.PublishLabelled(kind, id, nil, data)
}

// PublishLabelled is Publish of an event of an instance of a program with
// these labels.
func (ev *Events) PublishLabelled(kind, id string, labels map[string]string, data any) program.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	e := program.Event{
		Seq:    uint64(len(ev.log) + 1),
		TS:     time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(len(ev.log)) * time.Second),
		Kind:   kind,
		ID:     id,
		Labels: labels,
		Data:   data,
	}
	if name, _, ok := program.SplitID(id); ok {
		e.Program = name
	}
	ev.log = append(ev.log, e)
	for s := range ev.subs {
		ev.sendLocked(s, e)
	}
	return e
}

// CutOffAll cuts off every subscriber, as the daemon does to slow ones.
func (ev *Events) CutOffAll() {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for s := range ev.subs {
		ev.cutLocked(s)
	}
}

// Subscribers is the number of live subscriptions.
func (ev *Events) Subscribers() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.subs)
}

// Since implements api.Events.
func (ev *Events) Since(since uint64, limit int) ([]program.Event, error) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []program.Event
	for _, e := range ev.log {
		if e.Seq > since && (limit == 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

// LastSeq implements api.Events.
func (ev *Events) LastSeq() uint64 {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return uint64(len(ev.log))
}

// Subscribe implements api.Events: the backlog after since, then live.
func (ev *Events) Subscribe(since uint64) api.Subscription {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	size := ev.Buffer
	if size == 0 {
		size = 1024
	}
	s := &sub{ev: ev, c: make(chan program.Event, size), since: since}
	if ev.subs == nil {
		ev.subs = map[*sub]bool{}
	}
	ev.subs[s] = true
	for _, e := range ev.log {
		if e.Seq > since {
			ev.sendLocked(s, e)
		}
	}
	return s
}

func (ev *Events) sendLocked(s *sub, e program.Event) {
	if !ev.subs[s] || e.Seq <= s.since {
		return
	}
	select {
	case s.c <- e:
	default:
		ev.cutLocked(s)
	}
}

func (ev *Events) cutLocked(s *sub) {
	s.cutOff = true
	delete(ev.subs, s)
	close(s.c)
}

// sub is one subscription; its fields are guarded by ev.mu.
type sub struct {
	ev     *Events
	c      chan program.Event
	since  uint64 // only later events are sent, live ones too
	cutOff bool
}

func (s *sub) C() <-chan program.Event { return s.c }

func (s *sub) CutOff() bool {
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	return s.cutOff
}

func (s *sub) Close() {
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	if s.ev.subs[s] {
		delete(s.ev.subs, s)
		close(s.c)
	}
}
