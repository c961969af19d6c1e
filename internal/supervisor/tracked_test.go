package supervisor

import (
	"context"
	"slices"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// tracked_changed carries the change, not the list (docs/events.md): beside
// a fleet of 10,000 instances, adding and removing a program each writes an
// event of a few dozen bytes, where the whole list was ~150 KB.
func TestTrackedChangedCarriesTheChange(t *testing.T) {
	h := newHarness(t)
	big := spec("big", "/bin/true")
	big.Instances, big.Autostart = 10000, false // registered, never started
	if _, err := h.mgr.Add(big); err != nil {
		t.Fatal(err)
	}
	one := spec("one", "/bin/true")
	one.Autostart = false
	if _, err := h.mgr.Add(one); err != nil {
		t.Fatal(err)
	}
	if err := h.mgr.Remove(context.Background(), "one"); err != nil {
		t.Fatal(err)
	}
	h.mgr.trackedChanged() // no change: no event
	evs := h.matching(program.KindTrackedChanged, "")
	if len(evs) != 3 {
		t.Fatalf("%d tracked_changed events, want 3 (big, one added, one removed):\n%s", len(evs), h.dump())
	}
	first := data[program.TrackedChanged](evs[0])
	if first.Count != 10000 || len(first.Added) != 10000 || first.Added[9] != "big:9" || first.Added[10] != "big:10" || len(first.Removed) != 0 {
		t.Errorf("the first event: count %d, %d added (%v…), %d removed", first.Count, len(first.Added), first.Added[:11], len(first.Removed))
	}
	want := []program.TrackedChanged{
		{Added: []string{"one:0"}, Removed: []string{}, Count: 10001},
		{Added: []string{}, Removed: []string{"one:0"}, Count: 10000},
	}
	for i, e := range evs[1:] {
		got := data[program.TrackedChanged](e)
		if got.Count != want[i].Count || !slices.Equal(got.Added, want[i].Added) || !slices.Equal(got.Removed, want[i].Removed) {
			t.Errorf("event %d: %+v, want %+v", i+1, *got, want[i])
		}
		j, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if len(j) >= 300/2 { // an add and a remove together under 300 bytes of audit
			t.Errorf("event %d is %d bytes: %s", i+1, len(j), j)
		}
	}
}

func TestCompareIDs(t *testing.T) {
	ids := []string{"b:0", "a:10", "a:2", "a:1", "ab:0", "a:0"}
	slices.SortFunc(ids, program.CompareIDs)
	if want := []string{"a:0", "a:1", "a:2", "a:10", "ab:0", "b:0"}; !slices.Equal(ids, want) {
		t.Errorf("sorted %v, want %v", ids, want)
	}
}
