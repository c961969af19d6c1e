package restart

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// spec is a program at docs/config.md's defaults, with jitter off so backoffs are exact.
func spec(mod ...func(*program.Spec)) *program.Spec {
	s := &program.Spec{
		Name: "w", Command: []string{"w"}, Instances: 1, Restart: program.RestartAlways,
		BackoffInitial: time.Second, BackoffMax: 60 * time.Second, BackoffJitter: 0,
		CleanExitCodes: []int{0}, StableRunReset: 5 * time.Minute, MaxCrashes: 5,
		CleanRestartBudget: 10, CleanRestartWindow: 60 * time.Second, CleanRestartBackoff: time.Second,
		RSSExitCode: 12, RSSBackoff: 30 * time.Second, RSSLoopBudget: 3, RSSLoopWindow: 10 * time.Minute,
		WedgeLoopBudget: 3, WedgeLoopWindow: 30 * time.Minute,
	}
	for _, m := range mod {
		m(s)
	}
	return s
}

// end is one end of a run in a scenario.
type end struct {
	code   int
	sig    syscall.Signal // non-zero: killed by this signal
	spawn  bool           // the spawn failed
	err    error          // the spawn failed with this error
	oom    bool           // the kernel OOM-killed it (its cgroup said so)
	intent Intent
	ran    time.Duration // run length; default 0 (a run that died at once)
	gap    time.Duration // time from the previous end to this one's start; default 0
}

// want is what Decide must say about it; zero fields are not checked except
// crash, which always is.
type want struct {
	row    int
	cause  string
	crash  int
	next   Next
	reason string // backoff reason, "" = no backoff expected
	ms     int64
	warn   string // health_warn reason, "" = none
	count  int    // health_warn count, checked when warn != ""
}

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func run(t *testing.T, s *program.Spec, ends []end, wants []want) {
	t.Helper()
	var h History
	now := t0
	for i, e := range ends {
		ran := e.ran
		start := now.Add(e.gap)
		now = start.Add(ran)
		ex := program.Exit{Code: e.code, StartedAt: start, EndedAt: now}
		if e.sig != 0 {
			ex.Signaled, ex.Signal = true, e.sig
		}
		if e.spawn {
			ex.SpawnErr = errors.New("fork/exec /nope: no such file or directory")
			ex.EndedAt = start
		}
		if e.err != nil {
			ex.SpawnErr, ex.EndedAt = e.err, start
		}
		ex.OOMKilled = e.oom
		d := Decide(s, &h, ex, e.intent, now, func() float64 { return 0.5 })
		w := wants[i]
		check(t, i, d, w)
	}
}

func check(t *testing.T, i int, d Decision, w want) {
	t.Helper()
	if w.row != 0 && d.Row != w.row {
		t.Errorf("end %d: row %d, want %d", i, d.Row, w.row)
	}
	if w.cause != "" && d.Cause != w.cause {
		t.Errorf("end %d: cause %q, want %q", i, d.Cause, w.cause)
	}
	if d.CrashCount != w.crash {
		t.Errorf("end %d: crash_count %d, want %d", i, d.CrashCount, w.crash)
	}
	if d.Next != w.next {
		t.Errorf("end %d: next %d, want %d", i, d.Next, w.next)
	}
	switch {
	case w.reason == "" && d.Backoff != nil:
		t.Errorf("end %d: unexpected backoff %+v", i, *d.Backoff)
	case w.reason != "" && d.Backoff == nil:
		t.Errorf("end %d: no backoff, want %s %dms", i, w.reason, w.ms)
	case w.reason != "" && (d.Backoff.Reason != w.reason || d.Backoff.MS != w.ms || d.Backoff.CrashCount != w.crash):
		t.Errorf("end %d: backoff %+v, want %s %dms crash %d", i, *d.Backoff, w.reason, w.ms, w.crash)
	}
	if (d.Next == NextRestart) != (d.Backoff != nil) || (d.Next == NextFatal) != (d.GaveUp != nil) {
		t.Errorf("end %d: next %d with backoff %v gave_up %v", i, d.Next, d.Backoff, d.GaveUp)
	}
	switch {
	case w.warn == "" && d.Warn != nil:
		t.Errorf("end %d: unexpected warning %+v", i, *d.Warn)
	case w.warn != "" && (d.Warn == nil || d.Warn.Reason != w.warn || d.Warn.Count != w.count):
		t.Errorf("end %d: warning %+v, want %s count %d", i, d.Warn, w.warn, w.count)
	}
}

func TestRow4CrashesAndCleanExitsInterleaved(t *testing.T) {
	// Exit codes 1,0,1,0,1 with max_crashes = hard_max_crashes = 3: clean exits
	// neither add to nor forgive the crash count.
	s := spec(func(s *program.Spec) { s.MaxCrashes, s.HardMaxCrashes = 3, 3 })
	run(t, s,
		[]end{{code: 1}, {code: 0}, {code: 1}, {code: 0}, {code: 1}},
		[]want{
			{row: 4, cause: "runtime_error", crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 3, cause: "clean_exit", crash: 1, next: NextRestart, reason: "clean_exit"},
			{row: 4, cause: "runtime_error", crash: 2, next: NextRestart, reason: "crash", ms: 2000},
			{row: 3, cause: "clean_exit", crash: 2, next: NextRestart, reason: "clean_exit"},
			{row: 4, cause: "runtime_error", crash: 3, next: NextFatal, warn: "crash_budget_degraded", count: 3},
		})
}

func TestRow4StableRunReset(t *testing.T) {
	// A clean exit after a 6-minute run leaves crash_count alone; a crash
	// after one resets it to 1 (and, having outlived its backoff, restarts at once).
	run(t, spec(),
		[]end{{code: 1}, {code: 1}, {code: 0, ran: 6 * time.Minute}, {code: 1, ran: 6 * time.Minute}, {code: 1}},
		[]want{
			{row: 4, crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 4, crash: 2, next: NextRestart, reason: "crash", ms: 2000},
			{row: 3, crash: 2, next: NextRestart, reason: "clean_exit"},
			{row: 4, crash: 1, next: NextRestart, reason: "crash", ms: 0},
			{row: 4, crash: 2, next: NextRestart, reason: "crash", ms: 2000},
		})
}

func TestRow4BackoffDoublesToTheCap(t *testing.T) {
	s := spec(func(s *program.Spec) { s.MaxCrashes = 100 })
	var ends []end
	var wants []want
	for i, ms := range []int64{1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000} {
		ends = append(ends, end{code: 2})
		wants = append(wants, want{row: 4, cause: "unknown", crash: i + 1, next: NextRestart, reason: "crash", ms: ms})
	}
	run(t, s, ends, wants)
}

func TestRow4JitterStaysInRange(t *testing.T) {
	s := spec(func(s *program.Spec) { s.BackoffJitter = 0.1 })
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		d := CrashBackoff(s, 4, func() float64 { return r })
		if d < 7200*time.Millisecond || d > 8*time.Second {
			t.Errorf("rnd %v: backoff %v outside [7.2s, 8s]", r, d)
		}
	}
	if d := CrashBackoff(s, 1000, func() float64 { return 0 }); d != s.BackoffMax {
		t.Errorf("a huge crash count gives %v, want the cap %v", d, s.BackoffMax)
	}
}

func TestRow4DegradedWarnsOnceAndStableRunClearsIt(t *testing.T) {
	s := spec(func(s *program.Spec) { s.MaxCrashes = 2 })
	var h History
	now := t0
	decide := func(code int, ran time.Duration) Decision {
		start := now
		now = now.Add(ran)
		return Decide(s, &h, program.Exit{Code: code, StartedAt: start, EndedAt: now}, IntentNone, now, nil)
	}
	if d := decide(1, time.Second); d.Warn != nil || h.Degraded {
		t.Fatalf("crash 1 of 2: warn %v degraded %v", d.Warn, h.Degraded)
	}
	if d := decide(1, time.Second); d.Warn == nil || d.Warn.Reason != program.WarnCrashDegraded || d.Warn.Max != 2 || !h.Degraded {
		t.Fatalf("crash 2 of 2: warn %+v degraded %v", d.Warn, h.Degraded)
	}
	if d := decide(1, time.Second); d.Warn != nil || !h.Degraded || d.Next != NextRestart {
		t.Fatalf("crash 3 (soft budget keeps retrying, warns once): warn %+v degraded %v next %v", d.Warn, h.Degraded, d.Next)
	}
	if decide(0, 6*time.Minute); h.Degraded {
		t.Fatal("a run longer than stable_run_reset must clear degraded")
	}
}

func TestRow4SpawnFailureAndStartTimeout(t *testing.T) {
	run(t, spec(),
		[]end{{spawn: true}, {spawn: true}, {intent: IntentStartTimeout, sig: syscall.SIGKILL}, {intent: IntentStartTimeout, code: 0}},
		[]want{
			{row: 4, cause: "spawn_failed", crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 4, cause: "spawn_failed", crash: 2, next: NextRestart, reason: "crash", ms: 2000},
			{row: 4, cause: "start_timeout", crash: 3, next: NextRestart, reason: "crash", ms: 4000},
			{row: 4, cause: "start_timeout", crash: 4, next: NextRestart, reason: "crash", ms: 8000},
		})
}

func TestRow3CleanBudgetTripsOnBudgetPlusOne(t *testing.T) {
	s := spec(func(s *program.Spec) { s.CleanRestartBudget = 3 })
	run(t, s,
		[]end{{}, {}, {}, {}, {}, {gap: 2 * time.Minute}},
		[]want{
			{row: 3, next: NextRestart, reason: "clean_exit"},
			{row: 3, next: NextRestart, reason: "clean_exit"},
			{row: 3, next: NextRestart, reason: "clean_exit"},
			{row: 3, next: NextRestart, reason: "budget_exceeded", ms: 1000, warn: "clean_restart_budget_exceeded", count: 4},
			{row: 3, next: NextRestart, reason: "budget_exceeded", ms: 1000, warn: "clean_restart_budget_exceeded", count: 5},
			// two minutes later the window has slid past all of them
			{row: 3, next: NextRestart, reason: "clean_exit"},
		})
}

func TestRow3CustomCleanCodes(t *testing.T) {
	s := spec(func(s *program.Spec) { s.CleanExitCodes = []int{0, 3} })
	run(t, s, []end{{code: 3}, {code: 0}, {code: 4}},
		[]want{
			{row: 3, cause: "clean_exit", next: NextRestart, reason: "clean_exit"},
			{row: 3, cause: "clean_exit", next: NextRestart, reason: "clean_exit"},
			{row: 4, cause: "unknown", crash: 1, next: NextRestart, reason: "crash", ms: 1000},
		})
}

func TestRow2RSSNeverTouchesCrashCount(t *testing.T) {
	s := spec(func(s *program.Spec) { s.RSSLoopBudget = 2 })
	run(t, s,
		[]end{{code: 1}, {code: 12}, {intent: IntentRSSDrain, sig: syscall.SIGKILL}, {code: 12}, {code: 12, ran: 6 * time.Minute}, {code: 1}},
		[]want{
			{row: 4, crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 2, cause: "rss_watchdog", crash: 1, next: NextRestart, reason: "rss_watchdog", ms: 30000},
			{row: 2, cause: "rss_watchdog", crash: 1, next: NextRestart, reason: "rss_watchdog", ms: 30000},
			{row: 2, cause: "rss_watchdog", crash: 1, next: NextRestart, reason: "rss_watchdog", ms: 30000, warn: "rss_watchdog_loop", count: 3},
			// the stable-run reset does not defeat the loop breaker
			{row: 2, cause: "rss_watchdog", crash: 1, next: NextRestart, reason: "rss_watchdog", ms: 30000, warn: "rss_watchdog_loop", count: 4},
			{row: 4, crash: 2, next: NextRestart, reason: "crash", ms: 2000},
		})
}

func TestRow1IntentionalRestartsNeverTouchCrashCount(t *testing.T) {
	s := spec(func(s *program.Spec) { s.Restart = program.RestartNever })
	var h History
	// An operator restart restarts even with restart = "never"; a wedge
	// ends the run and, with "never", nothing restarts it.
	run(t, s,
		[]end{{intent: IntentOperatorRestart, sig: syscall.SIGTERM}, {intent: IntentWedgeRestart, sig: syscall.SIGKILL}, {intent: IntentOperatorRestart, code: 1}},
		[]want{
			{row: 1, cause: "operator_restart", next: NextRestart, reason: "operator_restart"},
			{row: 1, cause: "wedge_restart", next: NextExited},
			{row: 1, cause: "operator_restart", next: NextRestart, reason: "operator_restart"},
		})
	s = spec()
	Decide(s, &h, program.Exit{}, IntentWedgeRestart, t0, nil)
	Decide(s, &h, program.Exit{}, IntentWedgeRestart, t0.Add(time.Minute), nil)
	if n := h.WedgeRestarts(s.WedgeLoopWindow, t0.Add(2*time.Minute)); n != 2 {
		t.Errorf("wedge restarts in window = %d, want 2", n)
	}
	if n := h.WedgeRestarts(s.WedgeLoopWindow, t0.Add(31*time.Minute)); n != 0 {
		t.Errorf("wedge restarts after the window = %d, want 0", n)
	}
	if h.Restarts.WedgeRestart != 2 || h.CrashCount != 0 {
		t.Errorf("restarts %+v crash %d", h.Restarts, h.CrashCount)
	}
}

func TestFatalCodesAndPolicies(t *testing.T) {
	fatal := spec(func(s *program.Spec) { s.FatalExitCodes = []int{78} })
	run(t, fatal, []end{{code: 1}, {code: 78}},
		[]want{
			{row: 4, crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 0, cause: "unknown", crash: 1, next: NextFatal},
		})
	onFailure := spec(func(s *program.Spec) { s.Restart = program.RestartOnFailure })
	run(t, onFailure, []end{{code: 1}, {code: 12}, {code: 0}},
		[]want{
			{row: 4, crash: 1, next: NextRestart, reason: "crash", ms: 1000},
			{row: 2, crash: 1, next: NextRestart, reason: "rss_watchdog", ms: 30000},
			{row: 3, crash: 1, next: NextExited},
		})
	never := spec(func(s *program.Spec) { s.Restart = program.RestartNever })
	run(t, never, []end{{code: 1}}, []want{{row: 4, crash: 1, next: NextExited}})
	run(t, never, []end{{code: 0}}, []want{{row: 3, crash: 0, next: NextExited}})
}

func TestOperatorStopDoesNoAccounting(t *testing.T) {
	s := spec()
	var h History
	d := Decide(s, &h, program.Exit{Signaled: true, Signal: syscall.SIGKILL}, IntentStop, t0, nil)
	if d.Next != NextStopped || d.Cause != program.CauseOperatorStop || d.Backoff != nil || h.CrashCount != 0 || h.Restarts.Total() != 0 {
		t.Fatalf("stop: %+v history %+v", d, h)
	}
}

func TestCause(t *testing.T) {
	s := spec()
	sig := func(n syscall.Signal) program.Exit { return program.Exit{Signaled: true, Signal: n} }
	cases := []struct {
		exit   program.Exit
		intent Intent
		want   string
	}{
		{program.Exit{Code: 0}, IntentNone, "clean_exit"},
		{program.Exit{Code: 1}, IntentNone, "runtime_error"},
		{program.Exit{Code: 12}, IntentNone, "rss_watchdog"},
		{program.Exit{Code: 2}, IntentNone, "unknown"},
		{sig(syscall.SIGKILL), IntentNone, "oom_or_external_kill"},
		{sig(syscall.SIGTERM), IntentNone, "graceful_shutdown"},
		{sig(syscall.SIGSEGV), IntentNone, "unknown"},
		{program.Exit{SpawnErr: errors.New("x")}, IntentNone, "spawn_failed"},
		{sig(syscall.SIGKILL), IntentStop, "operator_stop"},
		{sig(syscall.SIGKILL), IntentOperatorRestart, "operator_restart"},
		{sig(syscall.SIGTERM), IntentWedgeRestart, "wedge_restart"},
		{sig(syscall.SIGKILL), IntentRSSDrain, "rss_watchdog"},
		{sig(syscall.SIGKILL), IntentStartTimeout, "start_timeout"},
	}
	for _, c := range cases {
		if got := Cause(s, c.exit, c.intent); got != c.want {
			t.Errorf("Cause(%+v, %d) = %q, want %q", c.exit, c.intent, got, c.want)
		}
	}
}

func TestBudgetsArePerHistory(t *testing.T) {
	// Two instances of one program: one's clean exits do not spend the other's budget.
	s := spec(func(s *program.Spec) { s.CleanRestartBudget = 1 })
	var a, b History
	ex := program.Exit{StartedAt: t0, EndedAt: t0}
	Decide(s, &a, ex, IntentNone, t0, nil)
	if d := Decide(s, &a, ex, IntentNone, t0, nil); d.Warn == nil {
		t.Fatal("a's second clean exit must pass its budget of 1")
	}
	if d := Decide(s, &b, ex, IntentNone, t0, nil); d.Warn != nil {
		t.Fatal("b's first clean exit must not see a's")
	}
}

func TestAdoptedRunsEndAsUnknownCrashes(t *testing.T) {
	s := spec()
	var h History
	d := Decide(s, &h, program.Exit{Unknown: true, Code: 0, StartedAt: t0, EndedAt: t0.Add(time.Second)}, IntentNone, t0, nil)
	if d.Cause != program.CauseUnknown || d.Row != 4 || d.CrashCount != 1 {
		t.Errorf("adopted run's end: %+v", d)
	}
	d = Decide(s, &h, program.Exit{Unknown: true}, IntentOperatorRestart, t0, nil)
	if d.Cause != program.CauseOperatorRestart || d.Row != 1 {
		t.Errorf("adopted run restarted by the operator: %+v", d)
	}
}

func TestRow4BackoffCountsFromTheRunsStart(t *testing.T) {
	// docs/restarts.md#the-crash-backoff, row 4: the backoff spaces starts. A 2.5 s run
	// killed with backoff_initial 2s restarts at once; the next, short one
	// waits what is left of 4 s; a run of an hour comes back at once even
	// though it is the third crash of a short history.
	s := spec(func(s *program.Spec) { s.BackoffInitial = 2 * time.Second })
	run(t, s,
		[]end{{sig: syscall.SIGKILL, ran: 2500 * time.Millisecond}, {code: 1, ran: 300 * time.Millisecond},
			{code: 1, ran: 7 * time.Second}, {code: 1, ran: time.Hour}},
		[]want{
			{row: 4, cause: "oom_or_external_kill", crash: 1, next: NextRestart, reason: "crash", ms: 0},
			{row: 4, cause: "runtime_error", crash: 2, next: NextRestart, reason: "crash", ms: 3700},
			{row: 4, cause: "runtime_error", crash: 3, next: NextRestart, reason: "crash", ms: 1000},
			{row: 4, cause: "runtime_error", crash: 1, next: NextRestart, reason: "crash", ms: 0},
		})
}

func TestSpawnFailureWaitsTheFloor(t *testing.T) {
	// backoff_initial 0 and a missing binary: never a spin.
	s := spec(func(s *program.Spec) { s.BackoffInitial = 0 })
	run(t, s, []end{{spawn: true}, {spawn: true}, {code: 1}},
		[]want{
			{row: 4, cause: "spawn_failed", crash: 1, next: NextRestart, reason: "crash", ms: 100},
			{row: 4, cause: "spawn_failed", crash: 2, next: NextRestart, reason: "crash", ms: 100},
			{row: 4, cause: "runtime_error", crash: 3, next: NextRestart, reason: "crash", ms: 0},
		})
}

func TestDaemonResourcesAreNotCrashes(t *testing.T) {
	// EMFILE, ENOMEM, EAGAIN, a cgroup the daemon could not make: crash_count
	// stays, the retries follow the crash curve by consecutive failures, and
	// each warns; a run that then ends on its own starts the count over.
	s := spec(func(s *program.Spec) { s.Restart = program.RestartNever })
	emfile := fmt.Errorf("open fifo: %w", syscall.EMFILE)
	cg := fmt.Errorf("cgroup worker-0: %w: %w", program.ErrResources, syscall.EROFS)
	run(t, s,
		[]end{{err: emfile}, {err: fmt.Errorf("fork: %w", syscall.EAGAIN)}, {err: cg}, {code: 1}, {err: syscall.ENOMEM}},
		[]want{
			{cause: "daemon_resources", crash: 0, next: NextRestart, reason: "daemon_resources", ms: 1000, warn: "daemon_resources", count: 1},
			{cause: "daemon_resources", crash: 0, next: NextRestart, reason: "daemon_resources", ms: 2000, warn: "daemon_resources", count: 2},
			{cause: "daemon_resources", crash: 0, next: NextRestart, reason: "daemon_resources", ms: 4000, warn: "daemon_resources", count: 3},
			{row: 4, cause: "runtime_error", crash: 1, next: NextExited},
			{cause: "daemon_resources", crash: 1, next: NextRestart, reason: "daemon_resources", ms: 1000, warn: "daemon_resources", count: 1},
		})
	if DaemonFault(errors.New("exec: no such file")) || DaemonFault(syscall.ENOENT) || DaemonFault(nil) {
		t.Error("a program's own spawn errors are not the daemon's")
	}
}

func TestOOMKillIsAMemoryEnd(t *testing.T) {
	// The kernel OOM-killed the run (its cgroup's memory.events said so):
	// row 2, likely_cause oom_kill, crash_count untouched.
	run(t, spec(), []end{{sig: syscall.SIGKILL, oom: true}, {sig: syscall.SIGKILL}},
		[]want{
			{row: 2, cause: "oom_kill", crash: 0, next: NextRestart, reason: "rss_watchdog", ms: 30000},
			{row: 4, cause: "oom_or_external_kill", crash: 1, next: NextRestart, reason: "crash", ms: 1000},
		})
}

// A History kept and restored decides as the original would: counters,
// and the budgets' windows, so a loop gets no fresh budget from a daemon
// crash; ends that fell out of their window are not kept.
func TestKeptHistoryDecidesAsTheOriginal(t *testing.T) {
	s := spec(func(s *program.Spec) { s.CleanRestartBudget = 3 })
	var h History
	now := t0
	Decide(s, &h, program.Exit{Code: 0, StartedAt: now, EndedAt: now}, IntentNone, now, nil)
	now = now.Add(2 * time.Minute) // the first clean end leaves the 60 s window
	for range 3 {
		Decide(s, &h, program.Exit{Code: 0, StartedAt: now, EndedAt: now}, IntentNone, now, nil)
		Decide(s, &h, program.Exit{Code: 1, StartedAt: now, EndedAt: now}, IntentNone, now, nil)
	}
	k := h.Keep(s, now)
	if len(k.Clean) != 3 || k.CrashCount != 3 || k.Restarts.CleanExit != 4 || k.Restarts.Crash != 3 {
		t.Fatalf("kept: %+v", k)
	}
	b, _ := json.Marshal(k)
	var back Kept
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r := Restore(back)
	d1 := Decide(s, &h, program.Exit{Code: 0, StartedAt: now, EndedAt: now}, IntentNone, now, nil)
	d2 := Decide(s, &r, program.Exit{Code: 0, StartedAt: now, EndedAt: now}, IntentNone, now, nil)
	if d2.Warn == nil || d2.Warn.Reason != program.WarnCleanBudget || d2.Warn.Count != 4 || *d1.Warn != *d2.Warn || *d1.Backoff != *d2.Backoff || d1.Delay != d2.Delay {
		t.Errorf("restored: %+v %+v, original: %+v %+v", d2.Warn, d2.Backoff, d1.Warn, d1.Backoff)
	}
}
