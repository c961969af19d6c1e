package broker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func exitWith(cause string) *program.LastExit {
	return &program.LastExit{LikelyCause: cause, At: program.Time{Time: t0}}
}

func TestLifecycleTable(t *testing.T) {
	states := []string{program.StateStarting, program.StateRunning, program.StateBackoff, program.StateStopping,
		program.StateStopped, program.StateExited, program.StateFatal}
	exits := map[string]*program.LastExit{
		"none": nil, "clean": exitWith(program.CauseCleanExit), "crash": exitWith(program.CauseRuntimeError),
		"stop": exitWith(program.CauseOperatorStop), "rss": exitWith(program.CauseRSSWatchdog),
	}
	for _, state := range states {
		// A run is in place in these states only.
		alive := state == program.StateRunning || state == program.StateStopping || state == program.StateStarting
		for _, agent := range []bool{false, true} {
			for _, turn := range []bool{false, true} {
				for name, last := range exits {
					got := Lifecycle(state, alive, agent, turn, last)
					want := expectLifecycle(state, alive, agent, turn, name)
					if got != want {
						t.Errorf("state=%s alive=%v agent=%v turn=%v last=%s: %s, want %s", state, alive, agent, turn, name, got, want)
					}
				}
			}
		}
	}
	// Not alive but starting (a spawn under way) is not an error.
	if got := Lifecycle(program.StateStarting, false, false, false, nil); got != program.LifecycleRunning {
		t.Errorf("starting without a pid: %s", got)
	}
}

// expectLifecycle restates docs/status.md's rule case by case.
func expectLifecycle(state string, alive, agent, turn bool, last string) string {
	switch {
	case alive && (turn || !agent):
		return "running"
	case alive:
		return "idle"
	case state == program.StateBackoff || state == program.StateFatal:
		return "error"
	case state == program.StateStopped:
		return "done"
	case last == "none" || last == "clean" || last == "stop":
		return "done"
	}
	return "error"
}

func snap(id string, mod func(*program.Snapshot)) program.Snapshot {
	name, k, _ := program.SplitID(id)
	s := program.Snapshot{
		Status: program.Status{ID: id, Program: name, Instance: k, State: program.StateStopped},
		Spec:   &program.Spec{Name: name, MaxCrashes: 5, StableRunReset: 5 * time.Minute, TurnIdleAfter: 10 * time.Second, Restart: "always"},
	}
	if mod != nil {
		mod(&s)
	}
	return s
}

func running(pid int) func(*program.Snapshot) {
	return func(s *program.Snapshot) {
		s.Status.State, s.Status.PID, s.Status.StartedAt = program.StateRunning, &pid, program.Time{Time: t0}
	}
}

type recorder struct {
	mu     sync.Mutex
	events []program.Event
}

func (r *recorder) publish(e program.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func TestStatusChangedOnlyOnRealChanges(t *testing.T) {
	var rec recorder
	now := t0
	b := New(rec.publish, func() time.Time { return now }, nil)
	b.Update(snap("w:0", nil)) // registration announces nothing
	b.Update(snap("w:0", nil))
	b.flush()
	if rec.count() != 0 {
		t.Fatalf("no-op updates published %d events", rec.count())
	}
	b.Update(snap("w:0", running(100)))
	now = now.Add(time.Minute) // uptime and why change; nothing a reader watches
	b.Update(snap("w:0", func(s *program.Snapshot) { running(100)(s); s.Status.CrashCount = 3 }))
	b.recheck()
	b.flush()
	if rec.count() != 1 {
		t.Fatalf("%d events, want 1 (stopped -> running)", rec.count())
	}
	b.Update(snap("w:0", running(101))) // a new pid is a change
	now = now.Add(Interval)
	b.flush()
	if rec.count() != 2 {
		t.Fatalf("%d events after a pid change, want 2", rec.count())
	}
	st := rec.events[1].Data.(*program.Status)
	if st.ID != "w:0" || *st.PID != 101 || st.Lifecycle != program.LifecycleRunning {
		t.Errorf("status_changed payload %+v", st)
	}
}

func TestAgentTurnFollowsOutput(t *testing.T) {
	var rec recorder
	now := t0
	var lastOut time.Time
	b := New(rec.publish, func() time.Time { return now }, nil)
	agent := func(s *program.Snapshot) {
		running(7)(s)
		s.Status.Agent = true
		s.LastOutput = func() time.Time { return lastOut }
	}
	b.Update(snap("a:0", agent))
	if st, _ := b.Status("a:0"); st.Lifecycle != program.LifecycleIdle || st.TurnActive {
		t.Fatalf("silent agent: %s turn %v", st.Lifecycle, st.TurnActive)
	}
	lastOut = now.Add(-time.Second)
	b.recheck()
	b.flush()
	if st, _ := b.Status("a:0"); st.Lifecycle != program.LifecycleRunning || !st.TurnActive {
		t.Fatalf("agent with fresh output: %s turn %v", st.Lifecycle, st.TurnActive)
	}
	now = now.Add(11 * time.Second)
	b.recheck()
	b.flush()
	if st, _ := b.Status("a:0"); st.Lifecycle != program.LifecycleIdle {
		t.Fatalf("agent after turn_idle_after of silence: %s", st.Lifecycle)
	}
	if rec.count() != 2 {
		t.Errorf("%d status_changed events, want 2 (idle -> running -> idle)", rec.count())
	}
}

func TestUnknownIDsLeaveNothingBehind(t *testing.T) {
	b := New(func(program.Event) {}, nil, nil)
	b.Update(snap("real:0", running(5)))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 100_000; i++ {
		_, err := b.Status(fmt.Sprintf("ghost-%d:0", i))
		if !errors.Is(err, program.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("100,000 unknown ids grew the heap by %d bytes", grew)
	}
	if n := len(b.List(false)); n != 1 {
		t.Errorf("list has %d entries, want 1", n)
	}
	b.Forget("real:0")
	if _, err := b.Status("real:0"); !errors.Is(err, program.ErrNotFound) {
		t.Errorf("a forgotten id still answers: %v", err)
	}
	if len(b.entries) != 0 {
		t.Errorf("forget left %d entries", len(b.entries))
	}
}

func TestListIsOneSnapshotOfTheRegisteredIDs(t *testing.T) {
	b := New(func(program.Event) {}, nil, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := program.InstanceID(fmt.Sprintf("p%d", w), i%50)
				b.Update(snap(id, running(1000+i)))
				if i%3 == 0 {
					b.Forget(id)
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		list := b.List(false)
		seen := map[string]bool{}
		for j, st := range list {
			if seen[st.ID] {
				t.Fatalf("duplicate id %s in a list", st.ID)
			}
			seen[st.ID] = true
			if j > 0 && list[j-1].Program == st.Program && list[j-1].Instance >= st.Instance {
				t.Fatalf("list not sorted at %s", st.ID)
			}
		}
	}
	close(stop)
	wg.Wait()
	b.mu.Lock()
	n := len(b.entries)
	b.mu.Unlock()
	if got := len(b.List(false)); got != n {
		t.Errorf("list has %d ids, registry %d", got, n)
	}
}

func TestWhySentences(t *testing.T) {
	code1 := 1
	cases := []struct {
		name string
		mod  func(*program.Snapshot)
		want string
	}{
		{"running", func(s *program.Snapshot) {
			running(3)(s)
			s.Status.Restarts = program.Restarts{Crash: 1, RSSWatchdog: 1}
		}, "up 1m21s; 1 crash and 1 memory drain since start"},
		{"backoff", func(s *program.Snapshot) {
			s.Status.State, s.Status.CrashCount = program.StateBackoff, 4
			s.Status.NextStartAt = program.Time{Time: t0.Add(81*time.Second + 8*time.Second)}
			s.Status.LastExit = &program.LastExit{Code: &code1, LikelyCause: program.CauseRuntimeError}
			s.Backoff = &program.Backoff{MS: 8000, Reason: program.ReasonCrash}
		}, "backing off 8s after crash 4 of 5: exit 1 (runtime_error)"},
		{"fatal", func(s *program.Snapshot) {
			s.Status.State, s.Status.CrashCount = program.StateFatal, 3
			s.Spec.HardMaxCrashes = 3
			s.Status.LastExit = &program.LastExit{Code: &code1, LikelyCause: program.CauseRuntimeError}
		}, "gave up after 3 crashes (hard_max_crashes 3): exit 1 (runtime_error); fix it, then tend start w:0"},
		// A protocol agent whose handshake failed is stopped by tend: the
		// why says so, and why, not that the run asked to stop.
		{"protocol stopping", func(s *program.Snapshot) {
			running(3)(s)
			s.Status.State, s.Stopping = program.StateStopping, "protocol"
			s.Spec.StopSignal, s.Spec.StopGrace = syscall.SIGTERM, 10*time.Second
			s.Protocol = func() program.ProtocolReport { return program.ProtocolReport{} }
			s.ProtocolWhy = "session/new failed: Internal error (-32603)"
		}, "stopping the run after its protocol failed (session/new failed: Internal error (-32603)): sent SIGTERM, SIGKILL after 10s"},
		{"operator stop after a protocol failure", func(s *program.Snapshot) {
			running(3)(s)
			s.Status.State, s.Stopping = program.StateStopping, "stop"
			s.Spec.StopSignal, s.Spec.StopGrace = syscall.SIGTERM, 10*time.Second
			s.Protocol = func() program.ProtocolReport { return program.ProtocolReport{} }
			s.ProtocolWhy = "session/new failed: Internal error (-32603)"
		}, "stopping: sent SIGTERM, SIGKILL after 10s; its protocol had failed: session/new failed: Internal error (-32603)"},
		{"protocol crash loop", func(s *program.Snapshot) {
			s.Status.State, s.Status.CrashCount, s.Spec.HardMaxCrashes = program.StateFatal, 3, 3
			sig := "SIGTERM"
			s.Status.LastExit = &program.LastExit{Signal: &sig, LikelyCause: program.CauseUnknown}
			s.Protocol = func() program.ProtocolReport { return program.ProtocolReport{} }
			s.ProtocolWhy = "session/new failed: Internal error (-32603); the agent said: no root"
		}, "gave up after 3 crashes (hard_max_crashes 3): SIGTERM (unknown); session/new failed: Internal error (-32603); the agent said: no root; fix it, then tend start w:0"},
		{"protocol needs authentication", func(s *program.Snapshot) {
			s.Status.State = program.StateFatal
			s.Protocol = func() program.ProtocolReport { return program.ProtocolReport{} }
			s.ProtocolWhy = "the agent needs authentication: login (-32000); it offers none"
		}, "the agent needs authentication: login (-32000); it offers none; fix it, then tend start w:0"},
		{"protocol start_timeout", func(s *program.Snapshot) {
			running(3)(s)
			s.Status.State, s.Stopping = program.StateStopping, "start_timeout"
			s.Spec.StopSignal, s.Spec.StopGrace, s.Spec.StartTimeout = syscall.SIGTERM, 10*time.Second, 30*time.Second
			s.Protocol = func() program.ProtocolReport { return program.ProtocolReport{Starting: "initialize"} }
		}, "no session within start_timeout 30s, stopping: sent SIGTERM, SIGKILL after 10s"},
	}
	for _, c := range cases {
		st := Derive(snap("w:0", c.mod), t0.Add(81*time.Second))
		if !strings.HasPrefix(st.Why, c.want) {
			t.Errorf("%s: why %q, want %q", c.name, st.Why, c.want)
		}
	}
}

func TestStatusChangedIsCoalescedPerInstance(t *testing.T) {
	// A run flipping its turn (or READY/RELOADING) in a loop: at most one
	// status_changed per Interval per instance, the latest state always
	// announced, and another instance's change not held back by it.
	var rec recorder
	now := t0
	b := New(rec.publish, func() time.Time { return now }, nil)
	turn := false
	flipper := func(s *program.Snapshot) {
		running(9)(s)
		s.Status.Agent = true
		t := turn
		s.Turn = &t
	}
	b.Update(snap("f:0", flipper))
	b.Update(snap("w:0", nil))
	for i := 0; i < 1000; i++ { // 1000 flips within one Interval
		turn = !turn
		b.Update(snap("f:0", flipper))
		now = now.Add(50 * time.Microsecond)
	}
	b.Update(snap("w:0", running(10)))
	if wait, ok := b.flush(); ok {
		t.Fatalf("nothing should be left due, next in %v", wait)
	}
	if rec.count() != 1 { // f:0 ended where it began (idle): only w:0 changed
		t.Fatalf("%d events after 1000 flips that ended where they began, want 1 (w:0)", rec.count())
	}
	turn = true
	b.Update(snap("f:0", flipper))
	b.flush()
	turn = false
	b.Update(snap("f:0", flipper))
	wait, ok := b.flush()
	if rec.count() != 2 || !ok || wait <= 0 || wait > Interval {
		t.Fatalf("%d events, next due in %v (%v); want the second flip held for the interval", rec.count(), wait, ok)
	}
	now = now.Add(Interval)
	b.flush()
	if rec.count() != 3 {
		t.Fatalf("%d events; the latest state must follow within the interval", rec.count())
	}
	last := rec.events[2].Data.(*program.Status)
	if last.ID != "f:0" || last.TurnActive {
		t.Fatalf("last announcement %+v, want f:0 idle", last)
	}
}

func TestRunPublishesWithoutBeingAsked(t *testing.T) {
	var rec recorder
	b := New(rec.publish, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	b.Update(snap("w:0", nil))
	b.Update(snap("w:0", running(10)))
	testutil.Eventually(t, "an event from Run", func() bool { return rec.count() > 0 }, testutil.Every(time.Millisecond))
	if rec.count() != 1 {
		t.Fatalf("%d events from Run", rec.count())
	}
}

// Briefs and List agree on order (program, then instance) and on what a
// readiness check reads, after registrations in any order and a Forget.
func TestBriefsFollowListOrder(t *testing.T) {
	b := New(func(program.Event) {}, func() time.Time { return t0 }, nil)
	pid := 42
	for _, id := range []struct {
		prog string
		k    int
	}{{"web", 1}, {"api", 0}, {"web", 0}, {"api", 10}, {"api", 2}, {"gone", 0}} {
		st := program.Status{ID: program.InstanceID(id.prog, id.k), Program: id.prog, Instance: id.k, State: program.StateStopped}
		if id.k == 0 {
			st.State, st.PID, st.Ready = program.StateRunning, &pid, true
		}
		if id.k == 2 {
			st.LastExit = exitWith(program.CauseOperatorStop)
		}
		b.Update(program.Snapshot{Status: st})
	}
	b.Forget("gone:0")
	want := []string{"api:0", "api:2", "api:10", "web:0", "web:1"}
	briefs, list := b.Briefs(), b.List(false)
	if len(briefs) != len(want) || len(list) != len(want) {
		t.Fatalf("%d briefs, %d statuses, want %d", len(briefs), len(list), len(want))
	}
	for i, id := range want {
		br, st := briefs[i], list[i]
		if br.ID != id || st.ID != id {
			t.Fatalf("position %d: brief %s, status %s, want %s", i, br.ID, st.ID, id)
		}
		if br.State != st.State || br.Alive != st.Alive() || br.Ready != st.Ready || br.Ended != (st.LastExit != nil) || br.Program != st.Program {
			t.Errorf("%s: brief %+v does not say what the status says (%s alive=%v ready=%v)", id, br, st.State, st.Alive(), st.Ready)
		}
	}
}

// A status carries its program's labels ({} without any); Select keeps
// the instances whose labels match, in order, and Brief answers one id.
func TestLabelsAndSelect(t *testing.T) {
	b := New(func(program.Event) {}, func() time.Time { return t0 }, nil)
	labelled := func(labels map[string]string) func(*program.Snapshot) {
		return func(s *program.Snapshot) { s.Spec = &program.Spec{Labels: labels} }
	}
	b.Update(snap("a:0", labelled(map[string]string{"session": "s-1", "owner": "ana"})))
	b.Update(snap("a:1", labelled(map[string]string{"session": "s-1", "owner": "ana"})))
	b.Update(snap("b:0", labelled(map[string]string{"session": "s-2"})))
	b.Update(snap("c:0", nil))
	sel, _ := program.ParseLabelSelector([]string{"session=s-1"})
	var ids []string
	for _, st := range b.Select(false, sel) {
		ids = append(ids, st.ID)
		if st.Labels["owner"] != "ana" {
			t.Errorf("%s: labels %v", st.ID, st.Labels)
		}
	}
	if strings.Join(ids, ",") != "a:0,a:1" {
		t.Errorf("Select session=s-1: %v", ids)
	}
	if got := len(b.Select(false, nil)); got != 4 {
		t.Errorf("Select with no labels: %d, want every instance", got)
	}
	st, err := b.Status("c:0")
	if err != nil || st.Labels == nil || len(st.Labels) != 0 {
		t.Errorf("no labels: %v (%v), want an empty map", st.Labels, err)
	}
	if br, ok := b.Brief("b:0"); !ok || br.Program != "b" {
		t.Errorf("Brief(b:0) = %+v, %v", br, ok)
	}
	if _, ok := b.Brief("nope:0"); ok {
		t.Error("Brief of an unknown id")
	}
}
