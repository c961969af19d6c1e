package events

import (
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// deadline bounds every wait; it is never a speed assertion.
const deadline = 20 * time.Second

// collect reads s until it has seen seq `until` or its channel closes. It
// may run in a goroutine of the test, so it fails with Errorf.
func collect(t *testing.T, s *Subscription, until uint64) []uint64 {
	t.Helper()
	var got []uint64
	timeout := time.After(deadline)
	for {
		select {
		case e, ok := <-s.C():
			if !ok {
				return got
			}
			got = append(got, e.Seq)
			if e.Seq == until {
				return got
			}
		case <-timeout:
			t.Errorf("timed out after %d events (last %v)", len(got), got[max(0, len(got)-1):])
			return got
		}
	}
}

// drain reads s until its channel closes.
func drain(t *testing.T, s *Subscription) []uint64 {
	t.Helper()
	return collect(t, s, 0)
}

func TestSubscribeBacklogThenLiveUnderConcurrentPublish(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Options{Dir: dir, Buffer: 1 << 16})
	for i := range 100 {
		l.Publish(spawned(i))
	}

	const publishers, each = 4, 500
	const total = 100 + publishers*each
	var wg sync.WaitGroup
	start := make(chan struct{})
	for p := range publishers {
		wg.Go(func() {
			<-start
			for i := range each {
				l.Publish(spawned(p*each + i))
			}
		})
	}

	early := l.Subscribe(10)
	close(start)
	mid := l.Subscribe(0)     // subscribed while publishers run
	last := l.LastSeq()       // a later point, for a subscription with no backlog
	live := l.Subscribe(last) // nothing before it

	for name, tc := range map[string]struct {
		s    *Subscription
		from uint64
	}{"since 10": {early, 11}, "since 0": {mid, 1}, "since last": {live, last + 1}} {
		if tc.from > total {
			continue // the publishers were done before LastSeq: nothing is due to live
		}
		if got := collect(t, tc.s, total); !slices.Equal(got, span(tc.from, total)) {
			t.Errorf("%s: got %d events, not exactly %d..%d in order", name, len(got), tc.from, total)
		}
		if tc.s.CutOff() {
			t.Errorf("%s: cut off", name)
		}
	}
	wg.Wait()
	if got := since(t, l, 0, 0); !slices.Equal(got, span(1, total)) {
		t.Errorf("Since(0) has %d events, want 1..%d", len(got), total)
	}
}

func TestSubscribeAheadOfLog(t *testing.T) {
	l := openLog(t, Options{Dir: t.TempDir()})
	l.Publish(spawned(1))
	s := l.Subscribe(3) // a reader that saw more than this log has
	for i := range 4 {
		l.Publish(spawned(i))
	}
	if got := collect(t, s, 5); !slices.Equal(got, []uint64{4, 5}) {
		t.Errorf("got %v, want only seq > 3", got)
	}
}

func TestSlowSubscriberIsCutOff(t *testing.T) {
	const buffer = 8
	l := openLog(t, Options{Dir: t.TempDir(), Buffer: buffer})
	slow := l.Subscribe(0) // never reads
	fast := l.Subscribe(0)

	done := make(chan []uint64)
	go func() {
		var got []uint64
		for i := range 10 * buffer {
			l.Publish(spawned(i))
			// The fast reader keeps up: one event out per event in.
			select {
			case e := <-fast.C():
				got = append(got, e.Seq)
			case <-time.After(deadline):
			}
		}
		done <- got
	}()
	select {
	case got := <-done:
		if !slices.Equal(got, span(1, 10*buffer)) {
			t.Errorf("fast subscriber got %v", got)
		}
	case <-time.After(deadline):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}

	if !slow.CutOff() || fast.CutOff() {
		t.Errorf("CutOff: slow %v fast %v, want true false", slow.CutOff(), fast.CutOff())
	}
	if n := l.CutOffs(); n != 1 {
		t.Errorf("CutOffs = %d, want 1", n)
	}
	// The slow reader still gets what was buffered, then the close: it
	// resumes from seq 8 with no gap.
	if got := drain(t, slow); !slices.Equal(got, span(1, buffer)) {
		t.Errorf("slow subscriber drained %v, want 1..%d then close", got, buffer)
	}
	resumed := l.Subscribe(buffer)
	if got := collect(t, resumed, 10*buffer); !slices.Equal(got, span(buffer+1, 10*buffer)) {
		t.Errorf("resumed subscriber got %v", got)
	}
	slow.Close() // after a cut-off, still fine
}

func TestCutOffDuringBacklog(t *testing.T) {
	const buffer = 8
	l := openLog(t, Options{Dir: t.TempDir(), Buffer: buffer})
	for i := range 50 {
		l.Publish(spawned(i))
	}
	s := l.Subscribe(0) // its backlog (50) is larger than its buffer
	for i := range buffer {
		l.Publish(spawned(i)) // wait beside the backlog
	}
	if s.CutOff() {
		t.Fatal("cut off before its live buffer was full")
	}
	l.Publish(spawned(0)) // one too many
	if !s.CutOff() || l.CutOffs() != 1 {
		t.Fatalf("CutOff %v CutOffs %d, want true 1", s.CutOff(), l.CutOffs())
	}
	// Everything it was owed up to the cut-off, without a gap, then close.
	if got := drain(t, s); !slices.Equal(got, span(1, 50+buffer)) {
		t.Errorf("got %v, want 1..%d then close", got, 50+buffer)
	}
}

func TestSubscriptionClose(t *testing.T) {
	// Fewer live events than the buffer: nobody is cut off.
	l := openLog(t, Options{Dir: t.TempDir(), Buffer: 16})
	for i := range 100 {
		l.Publish(spawned(i))
	}
	backlog := l.Subscribe(0) // its goroutine blocks sending the backlog
	live := l.Subscribe(l.LastSeq())

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 10 {
			l.Publish(spawned(i))
		}
	})
	for _, s := range []*Subscription{backlog, live} {
		wg.Go(s.Close)
		wg.Go(s.Close)
	}
	wg.Wait()
	for name, s := range map[string]*Subscription{"backlog": backlog, "live": live} {
		drain(t, s) // the channel closes
		if s.CutOff() {
			t.Errorf("%s: a closed subscription reports CutOff", name)
		}
		s.Close()
	}
}

func TestBacklogReadErrorEndsSubscription(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Options{Dir: dir})
	l.Publish(spawned(1))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s := l.Subscribe(0)
	drain(t, s)
	if s.Err() == nil {
		t.Error("Err = nil after the backlog could not be read")
	}
	l.Publish(spawned(2)) // and the log goes on
	s.Close()
}

func TestCloseDuringPublish(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Buffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		l.Publish(spawned(i))
	}

	var mu sync.Mutex
	var numbered []uint64 // guarded by mu
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				e := l.Publish(spawned(p*1000 + i))
				if e.Seq == 0 {
					return // closed
				}
				mu.Lock()
				numbered = append(numbered, e.Seq)
				mu.Unlock()
			}
		})
	}
	readers := []*Subscription{l.Subscribe(0), l.Subscribe(50), l.Subscribe(l.LastSeq())}
	idle := l.Subscribe(0) // never read until the end
	results := make([][]uint64, len(readers))
	for i, s := range readers {
		wg.Go(func() { results[i] = drain(t, s) })
	}
	for l.LastSeq() < 2000 {
		time.Sleep(time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wg.Wait() // publishers saw the close; readers' channels closed
	drain(t, idle)
	if s := l.Subscribe(0); len(drain(t, s)) != 0 {
		t.Error("Subscribe after Close delivered events")
	}

	slices.Sort(numbered)
	n := uint64(len(numbered)) + 100
	if !slices.Equal(numbered, span(101, n)) {
		t.Fatalf("Publish numbered %d events, not 101..%d", len(numbered), n)
	}
	for i, got := range results {
		// Each reader got a gap-free run in order (it may have been cut off).
		if len(got) > 0 && !slices.Equal(got, span(got[0], got[len(got)-1])) {
			t.Errorf("reader %d: events out of order or with a gap", i)
		}
	}
	l2 := openLog(t, Options{Dir: dir})
	if l2.LastSeq() != n {
		t.Errorf("LastSeq after reopen = %d, want %d", l2.LastSeq(), n)
	}
	if got := since(t, l2, 0, 0); !slices.Equal(got, span(1, n)) {
		t.Errorf("the audit log has %d events, want 1..%d", len(got), n)
	}
}
