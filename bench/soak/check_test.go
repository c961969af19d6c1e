//go:build soak

package soak

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// check ends the chaos and runs the checks: (a) seq, (b) one exited
// per run, the daemon's zombies, (c) its RSS, (d) tend down leaves nothing.
func (s *soak) check() {
	s.t.Helper()
	// Crashers end on their own at any time; stopped, the fleet holds still
	// while its status and events are compared.
	if _, err := s.r.client.Stop("crashers"); err != nil {
		s.fatalf("stop crashers: %v", err)
	}
	time.Sleep(settle)
	s.checkZombies()
	var err error
	if s.mem[1].idleEnd, err = minRSS(s.d.pid, rssSamples); err != nil {
		s.fatalf("RSS: %v", err)
	}
	s.logf("settled: RSS %.1f MiB (%s)", mib(s.mem[1].idleEnd), runtimeFigures(s.r.client.Socket()))
	list, events := s.snapshot()
	live := s.checkRuns(list, events)
	s.strayPre = s.r.strays.Load()
	s.down()
	s.checkAfterDown(live)
}

// snapshot returns the status list and every event with the fleet holding
// still: the list is taken before and after the events, until both agree.
func (s *soak) snapshot() (map[string]int, []program.Event) {
	s.t.Helper()
	for range 10 {
		before := s.pids()
		events, err := s.r.client.Events(0)
		if err != nil {
			s.fatalf("events: %v", err)
		}
		if after := s.pids(); maps.Equal(before, after) {
			return after, events
		}
		time.Sleep(time.Second)
	}
	s.fatalf("the fleet does not hold still once the chaos and the crashers stopped")
	return nil, nil
}

// pids is the pid of every instance's live run, by id.
func (s *soak) pids() map[string]int {
	s.t.Helper()
	list, err := s.r.client.List(false)
	if err != nil {
		s.fatalf("status list: %v", err)
	}
	out := map[string]int{}
	for _, st := range list {
		if st.PID != nil {
			out[st.ID] = *st.PID
		}
	}
	return out
}

// checkRuns checks (a) and (b) on the daemon's own answer (the events API):
// seq has no gap, and each spawned run has exactly one exited or is the
// live run of its instance. It returns the number of live runs.
func (s *soak) checkRuns(live map[string]int, events []program.Event) int {
	l := replay(events, s.excused)
	for _, id := range slices.Sorted(maps.Keys(l.open)) {
		if run := l.open[id]; live[id] != run.pid {
			l.unended(run, fmt.Sprintf("not alive now (the status says pid %d)", live[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(live)) {
		if run, ok := l.open[id]; !ok || run.pid != live[id] {
			l.problem("%s: live pid %d has no spawned event", id, live[id])
		}
	}
	s.report("before tend down", l)
	s.logf("before tend down: %d events (seq 1..%d), %d spawned, %d exited, %d alive, %d adopted, %d lost in the kill window %v",
		l.events, l.last, l.spawned, l.exited, len(live), l.adopted, len(l.lost), l.lost)
	return len(live)
}

// report fails the test with the ledger's problems.
func (s *soak) report(when string, l *ledger) {
	s.t.Helper()
	for _, p := range l.problems {
		s.t.Errorf("%s: %s", when, p)
	}
}

// checkZombies fails if the daemon leaves a zombie child unreaped: one seen
// twice, two seconds apart.
func (s *soak) checkZombies() {
	zombies := func() map[proc]bool {
		out := map[proc]bool{}
		for _, p := range allProcs() {
			if p.ppid == s.d.pid && p.state == 'Z' {
				out[p] = true
			}
		}
		return out
	}
	first := zombies()
	time.Sleep(2 * time.Second)
	for p := range zombies() {
		if first[p] {
			s.t.Errorf("the daemon leaves a zombie unreaped: %s", describe(p))
		}
	}
}

// down runs tend down and waits for the daemon to exit.
func (s *soak) down() {
	s.t.Helper()
	if out, err := s.r.tendCmd("down", "-c", s.r.conf); err != nil {
		s.t.Errorf("tend down: %v\n%s", err, out)
	}
	select {
	case <-s.d.done:
	case <-time.After(downWait):
		s.fatalf("the daemon has not exited %s after tend down", downWait)
	}
	s.logf("tend down done")
}

// checkAfterDown checks the whole audit log from its files once the daemon
// has stopped: no gap, every run ended with one exited, the last event is
// "daemon stopped"; and that no process of the fleet (nor any other
// descendant of this process, zombie or not) is left.
func (s *soak) checkAfterDown(live int) {
	events, err := s.r.readAudit()
	if err != nil {
		s.t.Fatalf("audit log: %v", err)
	}
	l := replay(events, s.excused)
	for _, id := range slices.Sorted(maps.Keys(l.open)) {
		l.unended(l.open[id], "the run is still without an exited after tend down")
	}
	s.report("after tend down", l)
	if n := len(events); n == 0 || !isPhase(events[n-1], program.PhaseStopped) {
		s.t.Errorf("the audit log does not end with daemon stopped")
	}
	var left []proc
	if !waitFor(30*time.Second, func() bool {
		s.r.reapStrays()
		left = descendants(os.Getpid(), allProcs())
		return len(left) == 0
	}) {
		for _, p := range left {
			s.t.Errorf("left after tend down: %s", describe(p))
		}
	}
	s.summary(l, live)
}

func isPhase(e program.Event, phase string) bool {
	d, ok := e.Data.(*program.DaemonPhase)
	return ok && d.Phase == phase
}

// summary logs the run's figures.
func (s *soak) summary(l *ledger, live int) {
	ch := s.ch
	ch.mu.Lock()
	errSeen := ch.errSeen
	ch.mu.Unlock()
	s.t.Logf(`soak summary
  chaos %s (two halves around the daemon's SIGKILL), wall time %s
  events: %d, seq 1..%d; seq %d was the last when daemon 1 was SIGKILLed
  runs: %d spawned, %d exited (%d still alive before tend down, all ended by it); %d adopted by daemon 2; %d ended in the kill window without exited %v
  chaos: %d SIGKILLs to runs (%d picked runs had already ended), %d operator restarts (%d refused), %d failed status lists; first errors %q
  zombies reaped by this process (runs and grandchildren orphaned by daemon 1): %d before tend down, %d in all
  daemon RSS under the chaos, after its first %s and at its end (the check, limit %+.0f%%), and idle before and after it:
    daemon 1: %s
    daemon 2: %s`,
		*soakDuration, time.Since(s.begin).Round(time.Second),
		l.events, l.last, s.atKill,
		l.spawned, l.exited, live, l.adopted, len(l.lost), l.lost,
		ch.kills.Load(), ch.missed.Load(), ch.restarts.Load(), ch.restartErrs.Load(), ch.listErrs.Load(), errSeen,
		s.strayPre, s.r.strays.Load(),
		chaosWarm(*soakDuration/2).Round(time.Second), 100*rssSlack, s.mem[0], s.mem[1])
}

func (m memFigures) String() string {
	return fmt.Sprintf("%.1f -> %.1f MiB (%+.1f%%); idle %.1f -> %.1f MiB (%+.1f%%); every %s: %s",
		mib(m.base), mib(m.end), pct(m.base, m.end), mib(m.idle), mib(m.idleEnd), pct(m.idle, m.idleEnd),
		m.every, strings.Join(m.trace, " "))
}

// pct is the change from a to b in percent.
func pct(a, b int64) float64 { return 100 * (float64(b) - float64(a)) / float64(a) }
