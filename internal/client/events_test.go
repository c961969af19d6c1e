package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func publish(d *daemon, n int) {
	for i := range n {
		id := program.InstanceID("web", i%2)
		d.ev.Publish(program.KindSpawned, id, program.Spawned{PID: 100 + i, Run: i})
	}
}

func seqsOf(events []program.Event) []uint64 {
	var out []uint64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func upTo(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestEventsPages(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	client.SetEventPage(3)
	t.Cleanup(func() { client.SetEventPage(10000) })
	publish(d, 10)
	events, err := c.Events(0)
	if err != nil || !slices.Equal(seqsOf(events), upTo(1, 10)) {
		t.Fatalf("Events(0) = %v, %v", seqsOf(events), err)
	}
	if sp, ok := events[0].Data.(*program.Spawned); !ok || sp.PID != 100 {
		t.Errorf("payload = %#v", events[0].Data)
	}
	events, err = c.EventsMatching(4, client.EventFilter{ID: "web:1"})
	if err != nil || !slices.Equal(seqsOf(events), []uint64{6, 8, 10}) {
		t.Errorf("EventsMatching = %v, %v", seqsOf(events), err)
	}
	if events, err := c.EventsMatching(0, client.EventFilter{Kinds: []string{"exited"}}); err != nil || len(events) != 0 {
		t.Errorf("no exited events: %v, %v", events, err)
	}
}

// collector gathers followed events.
type collector struct {
	mu     sync.Mutex // guards events
	events []program.Event
}

func (c *collector) add(e program.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
	return nil
}

func (c *collector) seqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return seqsOf(c.events)
}

func (c *collector) has(n int) func() bool {
	return func() bool { return len(c.seqs()) >= n }
}

func TestFollowReconnects(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	publish(d, 3)
	ctx, cancel := context.WithCancel(t.Context())
	var got collector
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx, 1, nil, "", got.add) }()
	testutil.Eventually(t, "backlog", got.has(2))

	publish(d, 2) // live
	testutil.Eventually(t, "live events", got.has(4))

	// Cut off as slow: Follow resumes after the last event it delivered.
	d.ev.CutOffAll()
	publish(d, 2)
	testutil.Eventually(t, "events after the cut-off", got.has(6))

	// The daemon goes away and comes back on the same socket.
	d.stop()
	publish(d, 2)
	d.serve(t)
	testutil.Eventually(t, "events after the restart", got.has(8))

	if want := upTo(2, 9); !slices.Equal(got.seqs(), want) {
		t.Errorf("seqs = %v, want %v (each once, in order)", got.seqs(), want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow after cancel = %v", err)
	}
}

func TestFollowFilterAndErrors(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	publish(d, 6)

	// fn's error ends Follow and comes back as is.
	stop := errors.New("enough")
	var got collector
	err := c.Follow(t.Context(), 0, []string{"spawned"}, "web:0", func(e program.Event) error {
		got.add(e)
		if len(got.seqs()) == 2 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("Follow = %v, want fn's error", err)
	}
	if want := []uint64{1, 3}; !slices.Equal(got.seqs(), want) {
		t.Errorf("filtered seqs = %v, want %v", got.seqs(), want)
	}

	// A bad query is not retried.
	err = c.Follow(t.Context(), 0, nil, "Bad!", got.add)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("Follow with a bad id = %v, want a 400 APIError", err)
	}
}
