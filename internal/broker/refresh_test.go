package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sampler is a run's Members as the supervisor's memberCache answers: a
// sample taken as of less than maxAge before asOf is reused, else one is
// taken (counted) as of asOf.
type sampler struct {
	mu    sync.Mutex
	at    time.Time
	taken int
	rss   int64
}

func (s *sampler) members(asOf time.Time, maxAge time.Duration) program.Members {
	s.mu.Lock()
	defer s.mu.Unlock()
	if maxAge <= 0 || s.at.IsZero() || asOf.Sub(s.at) >= maxAge {
		s.at, s.rss = asOf, s.rss+1
		s.taken++
	}
	return program.Members{Procs: []program.Process{{PID: 7, RSSBytes: s.rss}}, Tracking: program.TrackingCgroup, RSS: s.rss, At: s.at}
}

func (s *sampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}

// sampled is a broker with n running instances whose processes are read
// through samplers.
func sampled(t *testing.T, n int) (*Broker, *clock, []*sampler) {
	t.Helper()
	c := &clock{now: t0}
	b := New(func(program.Event) {}, c.Now, nil)
	var ss []*sampler
	for i := range n {
		s := &sampler{}
		ss = append(ss, s)
		b.Update(snap(program.InstanceID("p", i), func(sn *program.Snapshot) {
			running(100 + i)(sn)
			sn.Members = s.members
		}))
	}
	return b, c, ss
}

// statuses derives every status of l.
func statuses(l *List) []program.Status {
	out := make([]program.Status, l.Len())
	for i := range out {
		out[i] = l.Status(i)
	}
	return out
}

func taken(ss []*sampler) (n int) {
	for _, s := range ss {
		n += s.count()
	}
	return n
}

// A listing answers from the samples it finds and says how old they are; the samples are taken again only once its answer is written, so the
// next listing finds them fresh.
func TestListingAnswersFromSamplesThenRefreshes(t *testing.T) {
	b, c, ss := sampled(t, 3)

	l := b.Listing(false, nil) // nothing sampled yet: sampled now
	list := statuses(l)
	if got := taken(ss); got != 3 {
		t.Fatalf("first listing took %d samples, want 3", got)
	}
	for _, st := range list {
		if !st.SampledAt.Equal(t0) || st.RSSBytes != 1 {
			t.Errorf("%s: sampled_at %v, rss %d; want %v, 1", st.ID, st.SampledAt, st.RSSBytes, t0)
		}
	}
	l.Written()
	b.refresher.done.Wait()
	if got := taken(ss); got != 3 {
		t.Errorf("a refresh right after fresh samples took %d, want none", got-3)
	}

	c.add(5 * time.Second) // a poller's next call, 5s later
	l = b.Listing(false, nil)
	list = statuses(l)
	if got := taken(ss); got != 3 {
		t.Errorf("a listing 5s later sampled %d runs itself", got-3)
	}
	for _, st := range list {
		if age := st.ComputedAt.Sub(st.SampledAt.Time); age != 5*time.Second {
			t.Errorf("%s: processes %v old, want 5s", st.ID, age)
		}
	}
	l.Written()
	b.refresher.done.Wait()
	if got := taken(ss); got != 6 {
		t.Errorf("the refresh after the answer took %d samples, want 3", got-3)
	}

	c.add(500 * time.Millisecond)
	l = b.Listing(false, nil)
	list = statuses(l)
	for _, st := range list {
		if !st.SampledAt.Equal(t0.Add(5 * time.Second)) {
			t.Errorf("%s: sampled_at %v, want the refresh's %v", st.ID, st.SampledAt, t0.Add(5*time.Second))
		}
	}
	l.Written()             // the list is not to be used after this
	b.refresher.done.Wait() // within listTreeAge of the last refresh: none
	if got := taken(ss); got != 6 {
		t.Errorf("a listing 0.5s after a refresh refreshed again (%d samples)", got-6)
	}
}

// A listing after a long quiet reads no process in the request: it answers
// with the samples it finds, however old, says how old in sampled_at, and
// has them read again once its answer is written (docs/status.md).
func TestListingAfterAQuietSpellSamplesNothing(t *testing.T) {
	b, c, ss := sampled(t, 2)
	l := b.Listing(false, nil)
	statuses(l)
	l.Written()
	b.refresher.done.Wait()
	before := taken(ss)
	for _, quiet := range []time.Duration{11 * time.Second, time.Hour, 30 * 24 * time.Hour} {
		c.add(quiet)
		last := c.Now().Add(-quiet)
		l := b.Listing(false, nil)
		list := statuses(l)
		if got := taken(ss); got != before {
			t.Errorf("after %v of quiet the listing sampled %d runs itself", quiet, got-before)
		}
		for _, st := range list {
			if !st.SampledAt.Equal(last) || st.RSSBytes == 0 {
				t.Errorf("after %v: %s sampled_at %v rss %d, want the last sample's %v", quiet, st.ID, st.SampledAt, st.RSSBytes, last)
			}
		}
		l.Written()
		b.refresher.done.Wait()
		if got := taken(ss); got != before+2 {
			t.Errorf("after %v: the refresh took %d samples, want 2", quiet, got-before)
		}
		before = taken(ss)
	}
}

// The freshness policy, by who asks and what was kept: which derivations
// read the run's processes themselves (docs/status.md#how-fresh-the-processes-are).
func TestSamplePolicy(t *testing.T) {
	const (
		status = iota
		announce
		listing
	)
	cases := []struct {
		name   string
		asker  int
		kept   time.Duration // age of the kept sample; <0: none kept
		before bool          // the kept sample was taken before the run began
		reads  bool
	}{
		{"status, none kept", status, -1, false, true},
		{"status, 1ms old", status, time.Millisecond, false, true},
		{"announce, none kept", announce, -1, false, true},
		{"announce, 0.5s old", announce, 500 * time.Millisecond, false, false},
		{"announce, 2s old", announce, 2 * time.Second, false, true},
		{"listing, none kept", listing, -1, false, true},
		{"listing, 2s old", listing, 2 * time.Second, false, false},
		{"listing, 11s old", listing, 11 * time.Second, false, false},
		{"listing, a day old", listing, 24 * time.Hour, false, false},
		{"listing, an earlier run's", listing, time.Second, true, true},
		{"announce, an earlier run's", announce, 100 * time.Millisecond, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{now: t0}
			s := &sampler{}
			b := New(func(program.Event) {}, c.Now, nil)
			started := t0
			if tc.kept >= 0 {
				s.members(t0, 0)
				c.add(tc.kept)
				if !tc.before {
					started = t0.Add(-time.Second)
				} else {
					started = t0.Add(tc.kept / 2)
				}
			}
			sn := snap("p:0", func(sn *program.Snapshot) {
				running(100)(sn)
				sn.Status.StartedAt = program.Time{Time: started}
				sn.Members = s.members
			})
			before := s.count()
			now := c.Now()
			var st program.Status
			switch tc.asker {
			case status:
				st = b.derive(&sn, now, statusTreeAge)
			case announce:
				st = b.derive(&sn, now, listTreeAge)
			case listing:
				b.Update(sn)
				l := b.Listing(false, nil)
				st = l.Status(0)
				l.release()
			}
			if read := s.count() > before; read != tc.reads {
				t.Errorf("read the processes in the request: %v, want %v", read, tc.reads)
			}
			if st.SampledAt.Before(started) {
				t.Errorf("sampled_at %v is before the run began (%v)", st.SampledAt, started)
			}
		})
	}
}

// One instance's status always reads its processes afresh, however recent
// the last sample.
func TestStatusIsAlwaysFresh(t *testing.T) {
	b, c, ss := sampled(t, 1)
	for i := range 3 {
		c.add(time.Millisecond)
		st, err := b.Status("p:0")
		if err != nil {
			t.Fatal(err)
		}
		if !st.SampledAt.Equal(c.Now()) || ss[0].count() != i+1 {
			t.Errorf("status %d: sampled_at %v (now %v), %d samples", i, st.SampledAt, c.Now(), ss[0].count())
		}
	}
}

// Nothing is sampled unless asked: the refresher's goroutine ends with its
// work, and a broker nobody lists takes no sample.
func TestNoSamplingWhenIdle(t *testing.T) {
	b, c, ss := sampled(t, 2)
	l := b.Listing(false, nil)
	c.add(2 * time.Second)
	l.Written()
	b.refresher.done.Wait()
	b.refresher.mu.Lock()
	running := b.refresher.running
	b.refresher.mu.Unlock()
	if running {
		t.Error("the refresher's goroutine outlived its work")
	}
	before := taken(ss)
	c.add(time.Minute)
	time.Sleep(10 * time.Millisecond)
	if got := taken(ss); got != before {
		t.Errorf("an idle broker took %d samples", got-before)
	}
}

// A refresh covers what its listing selected; selections waiting together
// merge into every instance.
func TestRefreshFollowsTheSelection(t *testing.T) {
	c := &clock{now: t0}
	b := New(func(program.Event) {}, c.Now, nil)
	var agent, worker sampler
	b.Update(snap("a:0", func(s *program.Snapshot) { running(1)(s); s.Status.Agent = true; s.Members = agent.members }))
	b.Update(snap("w:0", func(s *program.Snapshot) { running(2)(s); s.Members = worker.members }))
	l := b.Listing(false, nil)
	l.Written()
	b.refresher.done.Wait()

	c.add(2 * time.Second)
	l = b.Listing(true, nil)
	list := statuses(l)
	if len(list) != 1 || list[0].ID != "a:0" {
		t.Fatalf("agents: %v", list)
	}
	l.Written()
	b.refresher.done.Wait()
	if agent.count() != 2 || worker.count() != 1 {
		t.Errorf("after an agents' listing: agent sampled %d times, worker %d; want 2, 1", agent.count(), worker.count())
	}

	var r refresher
	r.running = true // hold the goroutine off: both asks wait together
	r.ask(b, selection{agentsOnly: true})
	r.ask(b, selection{})
	r.ask(b, selection{agentsOnly: true})
	if !r.waiting || !r.pending.same(everything) {
		t.Errorf("two selections waiting: %+v, want every instance", r.pending)
	}
}

// AfterRefresh's func runs once each refresh is done, on its goroutine.
func TestAfterRefresh(t *testing.T) {
	b, c, ss := sampled(t, 2)
	var calls, samplesThen int
	b.AfterRefresh(func() { calls, samplesThen = calls+1, taken(ss) })
	b.Listing(false, nil).Written()
	b.refresher.done.Wait()
	c.add(2 * time.Second)
	l := b.Listing(false, nil)
	statuses(l)
	l.Written()
	b.refresher.done.Wait()
	if calls != 2 || samplesThen != 4 {
		t.Errorf("called after %d refreshes, seeing %d samples taken; want 2, 4 (the second refresh's too)", calls, samplesThen)
	}
}

// A sample taken before the run began is an earlier run's (the instance
// restarted, or its pid was reused): a listing never shows it as this
// run's processes, however young it is.
func TestListingNeverReusesAnEarlierRunsSample(t *testing.T) {
	b, c, ss := sampled(t, 1)
	b.Listing(false, nil).Written()
	b.refresher.done.Wait()
	if got := taken(ss); got != 1 {
		t.Fatalf("%d samples, want 1", got)
	}
	c.add(2 * time.Second) // the run ends and another begins, with the same Members
	restarted := c.Now()
	b.Update(snap("p:0", func(sn *program.Snapshot) {
		running(200)(sn)
		sn.Status.StartedAt = program.Time{Time: restarted}
		sn.Members = ss[0].members
	}))
	c.add(time.Second)
	l := b.Listing(false, nil)
	list := statuses(l)
	l.Written()
	b.refresher.done.Wait()
	if len(list) != 1 || list[0].SampledAt.Before(restarted) {
		t.Fatalf("after a restart: %+v, want a sample of the new run", list)
	}
	if got := taken(ss); got != 2 {
		t.Errorf("%d samples, want 2 (the new run's, read by the listing)", got)
	}
}

// A refresh steps aside while a list is being written: the next caller's
// list does not share a core with ten thousand reads.
func TestRefreshWaitsForListsBeingWritten(t *testing.T) {
	old := listYield
	listYield = time.Hour // no bound: only the list's end lets the refresh go on
	t.Cleanup(func() { listYield = old })
	b, c, ss := sampled(t, 3)
	l := b.Listing(false, nil)
	statuses(l)
	l.Written()
	b.refresher.done.Wait()
	before := taken(ss)

	c.add(time.Minute)
	first := b.Listing(false, nil)
	statuses(first)
	second := b.Listing(false, nil) // the next caller's, being written
	first.Written()                 // asks for the refresh
	time.Sleep(20 * time.Millisecond)
	if got := taken(ss); got != before {
		t.Errorf("the refresh read %d runs while a list was being written", got-before)
	}
	statuses(second)
	second.Written()
	b.refresher.done.Wait()
	if got := taken(ss); got != before+3 {
		t.Errorf("after the list: %d runs refreshed, want 3", got-before)
	}
}
