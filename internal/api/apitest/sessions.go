package apitest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"syscall"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/program"
)

// The fake's side of sessions: removal by label, signals, holds on logs.

// Added returns the body program name was added with, as the daemon would
// keep it (nil if it was not added).
func (b *Backend) Added(name string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.added[name]
}

// RemoveMatching implements api.Backend.
func (b *Backend) RemoveMatching(ctx context.Context, name string, labels program.LabelSelector, _ program.RemoveOptions) ([]string, error) {
	if name != "" {
		if _, err := b.resolve(name); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	names := map[string]bool{}
	for _, st := range b.statuses {
		if (name == "" || st.Program == name) && labels.Matches(st.Labels) {
			names[st.Program] = true
		}
	}
	b.mu.Unlock()
	var out []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if err := b.Remove(ctx, n, program.RemoveOptions{}); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Signal implements api.Backend: it records "signal SIGNAL ID" for each
// running instance sel names.
func (b *Backend) Signal(sel string, sig syscall.Signal) ([]string, error) {
	ids, err := b.resolve(sel)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, id := range ids {
		if b.statuses[id].PID != nil {
			out = append(out, id)
			b.calls = append(b.calls, "signal "+program.SignalName(sig)+" "+id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", program.ErrNotRunning, sel)
	}
	return out, nil
}

// Hold implements api.Backend: it counts the holds not released; the
// removal it waits for is a Remove of the program.
func (b *Backend) Hold(name string) api.Hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holds[name]++
	ch, ok := b.removed[name]
	if !ok {
		ch = make(chan struct{})
		b.removed[name] = ch
	}
	return &fakeHold{b: b, name: name, removed: ch}
}

type fakeHold struct {
	b       *Backend
	name    string
	removed chan struct{}
	once    sync.Once
}

func (h *fakeHold) Removed() <-chan struct{} { return h.removed }

func (h *fakeHold) Release() {
	h.once.Do(func() {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		if h.b.holds[h.name]--; h.b.holds[h.name] == 0 {
			delete(h.b.holds, h.name)
		}
	})
}

// Holds is the number of holds on program name not released.
func (b *Backend) Holds(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holds[name]
}

// OutputSettled implements api.Backend: a fake run's output is written at once.
func (b *Backend) OutputSettled(id string) bool { return true }
