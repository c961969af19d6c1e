//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/statedir"
)

// Waits that only a broken daemon (or a very busy machine) needs.
const (
	upWait     = 2 * time.Minute // a daemon until the steady fleet runs
	downWait   = 2 * time.Minute // tend down until the daemon has exited
	warmUp     = 5 * time.Second // after the fleet runs, before the RSS baseline
	settle     = 2 * time.Second // after the chaos, before the checks
	gap        = time.Second     // between the daemon's SIGKILL and its restart
	rssSamples = 3               // RSS levels are the least of this many, a second apart
	rssSlack   = 0.10            // the daemon's RSS may grow this much over its baseline,
	rssFloor   = 3 << 20         // or this many bytes, whichever is more: a heap's next GC target alone moves a 20 MiB daemon by 2 MiB on a loaded machine
)

// soak is one run of TestSoak: the rig, the chaos and the figures of the
// summary. Only the test's goroutine touches it.
type soak struct {
	t     *testing.T
	r     *rig
	ch    *chaos
	d     *daemonProc // the daemon running now
	begin time.Time

	excused  map[runRef]string // runs that may lack an exited (see excuse)
	atKill   uint64            // the last seq in the log when the daemon was killed
	mem      [2]memFigures     // of daemon 1 and daemon 2
	strayPre int64             // zombies this process reaped before tend down
}

// memFigures is one daemon's RSS. The check compares base and end, both
// taken under the chaos: an idle level against one after the churn would
// measure the heap's working size under load (a few MiB on a ~27 MiB
// daemon, GC timing deciding how much), not a leak. The idle levels are
// reported beside them.
type memFigures struct {
	idle    int64         // after warm-up, before the chaos
	base    int64         // after the chaos's first stretch (its warm-up)
	end     int64         // at the end of the chaos
	idleEnd int64         // after the chaos, the fleet settled
	every   time.Duration // the trace's step
	trace   []string      // RSS every step during the chaos, MiB
}

func TestSoak(t *testing.T) {
	// Runs orphaned by the killed daemon come to this process, which reaps
	// them by pid (rig.reapStrays).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &soak{t: t, r: newRig(t), begin: time.Now()}
	s.ch = newChaos(s.r.client, seed)
	t.Logf("work dir %s, chaos seed %d, duration %s", s.r.dir, seed, *soakDuration)
	ctx, cancel := context.WithCancel(context.Background())
	go s.r.reapLoop(ctx)
	defer s.cleanup(cancel)

	s.d = s.r.startDaemon(1)
	s.mem[0].idle = s.warm("first daemon")
	s.storm(*soakDuration/2, &s.mem[0])
	s.killDaemon()
	time.Sleep(gap)
	s.d = s.r.startDaemon(2)
	s.awaitAdoption()
	s.mem[1].idle = s.warm("second daemon")
	s.storm(*soakDuration/2, &s.mem[1])
	s.check()
}

// cleanup runs last, whatever happened: the daemon is stopped, anything
// left of the fleet is killed and reaped, and the work directory removed
// unless the test failed or -soak.keep asks to keep it.
func (s *soak) cleanup(cancel context.CancelFunc) {
	if s.d != nil {
		s.r.stopDaemon(s.d)
	}
	cancel()
	s.r.killLeftovers()
	if s.t.Failed() || *soakKeep {
		s.t.Logf("kept %s (daemon logs up-1.log, up-2.log; state/audit, state/logs)", s.r.dir)
		return
	}
	os.RemoveAll(s.r.dir)
}

// logf is t.Logf with the time since the start.
func (s *soak) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("%6.1fs  %s", time.Since(s.begin).Seconds(), fmt.Sprintf(format, args...))
}

// fatalf ends the test with the tail of the running daemon's log.
func (s *soak) fatalf(format string, args ...any) {
	s.t.Helper()
	b, _ := os.ReadFile(s.d.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	s.t.Fatalf("%s\n-- last lines of %s:\n%s", fmt.Sprintf(format, args...), s.d.log,
		strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

// warm waits until the daemon serves and the steady fleet runs, lets it
// settle, and returns the daemon's idle RSS.
func (s *soak) warm(what string) int64 {
	s.t.Helper()
	s.waitSteady(what)
	time.Sleep(warmUp)
	idle, err := minRSS(s.d.pid, rssSamples)
	if err != nil {
		s.fatalf("%s: RSS: %v", what, err)
	}
	s.logf("%s (pid %d) warm: idle RSS %.1f MiB (%s)", what, s.d.pid, mib(idle), runtimeFigures(s.r.client.Socket()))
	return idle
}

// waitSteady waits until every instance but the crashers runs.
func (s *soak) waitSteady(what string) {
	s.t.Helper()
	if !waitFor(upWait, func() bool { return s.daemonGone() == nil && s.r.steadyRunning() }) {
		if err := s.daemonGone(); err != nil {
			s.fatalf("%s: %v", what, err)
		}
		s.fatalf("%s: the %d steady instances are not all running after %s", what, nSteady, upWait)
	}
}

// daemonGone is an error once the current daemon has exited.
func (s *soak) daemonGone() error {
	select {
	case <-s.d.done:
		return fmt.Errorf("daemon %d (pid %d) exited", s.d.n, s.d.pid)
	default:
		return nil
	}
}

// storm runs the chaos for d against the current daemon, sampling its RSS
// every second into m.
func (s *soak) storm(d time.Duration, m *memFigures) {
	s.logf("chaos for %s", d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	samples := make(chan []int64)
	go func() { samples <- sampleRSS(ctx, s.d.pid) }()
	s.ch.run(ctx, s.d.pid)
	m.set(<-samples, chaosWarm(d), traceStep(d))
	if err := s.daemonGone(); err != nil {
		s.fatalf("during the chaos: %v", err)
	}
	s.logf("chaos paused: %d kills so far (%s); daemon RSS (MiB, every %s): %s",
		s.ch.kills.Load(), runtimeFigures(s.r.client.Socket()), m.every, strings.Join(m.trace, " "))
	if m.base == 0 {
		s.logf("too short for an RSS check: %s of chaos", d)
		return
	}
	if limit := max(float64(m.base)*(1+rssSlack), float64(m.base+rssFloor)); float64(m.end) > limit {
		s.t.Errorf("daemon RSS grew under the chaos from %.1f MiB after its warm-up to %.1f MiB at its end (%+.1f%%, limit %+.0f%% or %.0f MiB)",
			mib(m.base), mib(m.end), pct(m.base, m.end), 100*rssSlack, mib(rssFloor))
	}
}

// chaosWarm is how long the chaos runs before the daemon's RSS under it is
// taken as the baseline: the heap grows to its working size meanwhile.
func chaosWarm(d time.Duration) time.Duration { return min(d/3, 30*time.Second) }

// killDaemon waits for the fleet to run again (no run is killed while no
// daemon runs), measures the daemon's RSS, SIGKILLs it and notes which runs
// may lack an exited event because of the kill (see excuse).
func (s *soak) killDaemon() {
	s.t.Helper()
	s.waitSteady("before the daemon's SIGKILL")
	var err error
	if s.mem[0].idleEnd, err = minRSS(s.d.pid, rssSamples); err != nil {
		s.fatalf("RSS: %v", err)
	}
	s.r.hold.Store(true) // zombies from now on are for the next daemon to adopt
	if err := syscall.Kill(s.d.pid, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.d.done
	events, err := s.r.readAudit()
	if err != nil {
		s.t.Fatalf("audit log after the SIGKILL: %v", err)
	}
	sd, err := statedir.Open(filepath.Join(s.r.dir, "state"))
	if err != nil {
		s.t.Fatalf("state dir after the SIGKILL: %v", err)
	}
	loaded, err := runs.Load(sd, time.Now())
	sd.Close()
	if err != nil || loaded.Problems != nil {
		s.t.Fatalf("runs.json after the SIGKILL: %v %q", err, loaded.Problems)
	}
	recs := loaded.Records
	l := replay(events, nil)
	s.atKill = l.last
	s.excused = excuse(l.open, recs)
	s.logf("daemon 1 SIGKILLed: %d events, %d runs in place, %d in runs.json, %d in a kill window %v",
		len(events), len(l.open), len(recs), len(s.excused), s.excused)
}

// awaitAdoption waits for the new daemon to say it adopted the runs left
// behind, then lets this process reap zombies again.
func (s *soak) awaitAdoption() {
	s.t.Helper()
	adopted := 0
	ok := waitFor(upWait, func() bool {
		evs, err := s.r.client.EventsMatching(s.atKill, client.EventFilter{Kinds: []string{program.KindDaemon}})
		if err != nil || s.daemonGone() != nil {
			return false
		}
		for _, e := range evs {
			if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseAdopted && d.Count != nil {
				adopted = *d.Count
			}
		}
		return adopted > 0
	})
	if !ok {
		s.fatalf("daemon 2 did not report adopting the runs left behind (%v)", s.daemonGone())
	}
	s.r.hold.Store(false)
	s.logf("daemon 2 (pid %d) adopted %d runs", s.d.pid, adopted)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// traceStep is how often the RSS trace of the summary has a point: about a
// dozen points, at least 5 s apart.
func traceStep(d time.Duration) time.Duration {
	return max(5*time.Second, (d / 12).Round(5*time.Second))
}

// sampleRSS samples pid's RSS every second until ctx ends.
func sampleRSS(ctx context.Context, pid int) []int64 {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var out []int64
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
			if v, err := rss(pid); err == nil {
				out = append(out, v)
			}
		}
	}
}

// set takes the base (least of rssSamples samples after warm) and the end
// (least of the last rssSamples) from one sample a second, and a trace
// with a point every step.
func (m *memFigures) set(samples []int64, warm, step time.Duration) {
	w := int(warm / time.Second)
	if len(samples) >= w+2*rssSamples {
		m.base = slices.Min(samples[w : w+rssSamples])
		m.end = slices.Min(samples[len(samples)-rssSamples:])
	}
	m.every = step
	n := int(step / time.Second)
	for i := n - 1; i < len(samples); i += n {
		m.trace = append(m.trace, fmt.Sprintf("%.1f", mib(samples[i])))
	}
}
