// Package restart is tend's restart policy, apart from the mechanism: given a
// program's Spec, an instance's History, how its run ended and the time, Decide
// says what the end was (likely cause, row of docs/restarts.md#the-four-rows), what it did to the
// counts and budgets, and what happens next (restart after a delay, stop,
// exited, fatal). It is pure: no clock, no randomness, no I/O of its own; the
// caller owns the History (the instance's supervisor goroutine) and passes now.
package restart

import (
	"errors"
	"math"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Intent is what tend itself meant by ending a run, if anything. The exit
// status of a run that tend killed says SIGTERM or SIGKILL; the intent is what
// keeps it from being read as a crash or an outside kill.
type Intent int

const (
	IntentNone            Intent = iota // the run ended on its own (or from outside)
	IntentOperatorRestart               // `tend restart`
	IntentWedgeRestart                  // the wedge watchdog restarted it
	IntentStop                          // `tend stop`, `tend rm`, reload or daemon shutdown
	IntentRSSDrain                      // drained for passing max_rss
	IntentStartTimeout                  // no READY=1 within start_timeout
	// A protocol agent's connection failed (docs/protocol.md#bad-input):
	// a crash (a message over 8 MiB, a session refused); or, for an agent
	// that needs authentication, the end: fatal at once, no crash loop.
	IntentProtocolCrash
	IntentProtocolFatal
)

// Next is what the supervisor does after an end.
type Next int

const (
	NextRestart Next = iota // spawn again after Decision.Delay
	NextStopped             // stay stopped (operator)
	NextExited              // ended, not restarting (restart policy)
	NextFatal               // gave up: a fatal code or the hard crash budget
)

// History is one instance's restart accounting. The zero value is a fresh
// instance. It belongs to whoever calls Decide (one goroutine).
type History struct {
	CrashCount int
	Degraded   bool             // crash_count reached max_crashes; cleared by a stable run
	Restarts   program.Restarts // ends followed by a restart, by cause

	resourceFails int // consecutive spawns the daemon could not make (daemon_resources)

	clean, rss, wedge window // end times inside each sliding window
}

// SpawnFloor is the least a failed spawn waits before the next, whatever the
// backoff (docs/restarts.md#the-crash-backoff): a misconfigured program can never spin the daemon.
const SpawnFloor = 100 * time.Millisecond

// Decision is the verdict on one end of a run. Events follow docs/events.md's
// order: exited (with Cause, CrashCount), then Warn, then Backoff or GaveUp.
type Decision struct {
	Cause      string // likely_cause
	Row        int    // 1..4 of docs/restarts.md#the-four-rows; 0 for a stop or a fatal exit code
	CrashCount int
	Warn       *program.HealthWarn
	Next       Next
	Delay      time.Duration    // before the next spawn, with NextRestart
	Backoff    *program.Backoff // set exactly when Next is NextRestart
	GaveUp     *program.GaveUp  // set exactly when Next is NextFatal
}

// Decide applies docs/restarts.md to one end of a run and updates h. rnd returns a
// number in [0, 1) for the backoff jitter.
func Decide(s *program.Spec, h *History, end program.Exit, intent Intent, now time.Time, rnd func() float64) Decision {
	d := Decision{Cause: Cause(s, end, intent)}
	if end.Duration() > s.StableRunReset {
		h.Degraded = false // a run outlived stable_run_reset, whatever its end
	}
	resources := intent == IntentNone && DaemonFault(end.SpawnErr)
	if !resources {
		h.resourceFails = 0
	}
	switch {
	case intent == IntentStop:
		d.Next = NextStopped
	case intent == IntentWedgeRestart && s.Restart == program.RestartNever:
		d.Row, d.Next = 1, NextExited // a wedged run is ended, and nothing restarts
		h.wedge.add(now)
	case intent == IntentOperatorRestart || intent == IntentWedgeRestart:
		decideIntentional(h, intent, now, &d)
	case intent == IntentStartTimeout || intent == IntentProtocolCrash:
		decideCrash(s, h, end, rnd, &d)
	case intent == IntentProtocolFatal:
		d.Next = NextFatal
		d.GaveUp = &program.GaveUp{CrashCount: h.CrashCount, Max: s.HardMaxCrashes}
	case resources:
		decideResources(s, h, rnd, &d)
	case fatalCode(s, end):
		d.Next = NextFatal
		d.GaveUp = &program.GaveUp{CrashCount: h.CrashCount, Max: s.HardMaxCrashes}
	case intent == IntentRSSDrain || end.OOMKilled || exitedWith(end, s.RSSExitCode):
		decideRSS(s, h, now, &d)
	case intent == IntentNone && hasCode(end) && s.IsCleanCode(end.Code):
		decideClean(s, h, now, &d)
	default:
		decideCrash(s, h, end, rnd, &d)
	}
	d.CrashCount = h.CrashCount
	if d.Next == NextRestart {
		d.Backoff.CrashCount = h.CrashCount
		d.Delay = time.Duration(d.Backoff.MS) * time.Millisecond
	}
	return d
}

// Row 1: tend or the operator restarted it on purpose.
func decideIntentional(h *History, intent Intent, now time.Time, d *Decision) {
	d.Row, d.Next = 1, NextRestart
	if intent == IntentWedgeRestart {
		h.wedge.add(now)
		h.Restarts.WedgeRestart++
		d.Backoff = &program.Backoff{Reason: program.ReasonWedgeRestart}
		return
	}
	h.Restarts.OperatorRestart++
	d.Backoff = &program.Backoff{Reason: program.ReasonOperatorRestart}
}

// Row 2: a memory drain, by the worker itself or by tend.
func decideRSS(s *program.Spec, h *History, now time.Time, d *Decision) {
	d.Row = 2
	if n := h.rss.record(now, s.RSSLoopWindow); n > s.RSSLoopBudget {
		d.Warn = &program.HealthWarn{Reason: program.WarnRSSLoop, Count: n, WindowMS: s.RSSLoopWindow.Milliseconds()}
	}
	if s.Restart == program.RestartNever {
		d.Next = NextExited
		return
	}
	d.Next = NextRestart
	h.Restarts.RSSWatchdog++
	d.Backoff = &program.Backoff{MS: s.RSSBackoff.Milliseconds(), Reason: program.ReasonRSSWatchdog}
}

// Row 3: a clean exit, paced by the clean-restart budget.
func decideClean(s *program.Spec, h *History, now time.Time, d *Decision) {
	d.Row = 3
	if s.Restart != program.RestartAlways {
		d.Next = NextExited
		return
	}
	d.Next = NextRestart
	h.Restarts.CleanExit++
	if n := h.clean.record(now, s.CleanRestartWindow); n > s.CleanRestartBudget {
		d.Warn = &program.HealthWarn{Reason: program.WarnCleanBudget, Count: n, WindowMS: s.CleanRestartWindow.Milliseconds()}
		d.Backoff = &program.Backoff{MS: s.CleanRestartBackoff.Milliseconds(), Reason: program.ReasonBudgetExceeded}
		return
	}
	d.Backoff = &program.Backoff{Reason: program.ReasonCleanExit}
}

// The daemon could not make the run (docs/restarts.md#daemon-resources): not the
// program's crash, so crash_count stays, but the retries follow the crash
// curve (by consecutive failures) and each one warns.
func decideResources(s *program.Spec, h *History, rnd func() float64, d *Decision) {
	h.resourceFails++
	d.Next = NextRestart
	d.Warn = &program.HealthWarn{Reason: program.WarnDaemonResources, Count: h.resourceFails}
	wait := max(CrashBackoff(s, h.resourceFails, rnd), SpawnFloor)
	d.Backoff = &program.Backoff{MS: wait.Milliseconds(), Reason: program.ReasonDaemonResources}
}

// DaemonFault reports whether a spawn error is the daemon's own shortage
// (descriptors, memory, processes, a cgroup it could not make) rather than
// the program's.
func DaemonFault(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, program.ErrResources) || errors.Is(err, syscall.EMFILE) ||
		errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN)
}

// Row 4: a crash. A stable run forgives the history before it. The backoff
// spaces starts, not exits: it counts from the run's start, so a run that
// lasted longer than its backoff restarts at once; a failed spawn still
// waits SpawnFloor.
func decideCrash(s *program.Spec, h *History, end program.Exit, rnd func() float64, d *Decision) {
	d.Row = 4
	if end.Duration() > s.StableRunReset {
		h.CrashCount = 1
	} else {
		h.CrashCount++
	}
	if h.CrashCount >= s.MaxCrashes && !h.Degraded {
		h.Degraded = true
		d.Warn = &program.HealthWarn{Reason: program.WarnCrashDegraded, Count: h.CrashCount, Max: s.MaxCrashes}
	}
	switch {
	case s.HardMaxCrashes > 0 && h.CrashCount >= s.HardMaxCrashes:
		d.Next = NextFatal
		d.GaveUp = &program.GaveUp{CrashCount: h.CrashCount, Max: s.HardMaxCrashes}
	case s.Restart == program.RestartNever:
		d.Next = NextExited
	default:
		d.Next = NextRestart
		h.Restarts.Crash++
		wait := max(CrashBackoff(s, h.CrashCount, rnd)-end.Duration(), 0)
		if end.SpawnErr != nil {
			wait = max(wait, SpawnFloor)
		}
		d.Backoff = &program.Backoff{MS: wait.Milliseconds(), Reason: program.ReasonCrash}
	}
}

// CrashBackoff is min(initial·2^(crashCount−1), max), drawn from
// [ms·(1−jitter), ms].
func CrashBackoff(s *program.Spec, crashCount int, rnd func() float64) time.Duration {
	exp := math.Min(float64(max(crashCount-1, 0)), 62)
	d := math.Min(float64(s.BackoffInitial)*math.Exp2(exp), float64(s.BackoffMax))
	if s.BackoffJitter > 0 && rnd != nil {
		d *= 1 - s.BackoffJitter*rnd()
	}
	return time.Duration(d)
}

// Cause is the likely_cause of an end (docs/restarts.md#likely-causes).
func Cause(s *program.Spec, end program.Exit, intent Intent) string {
	switch intent {
	case IntentOperatorRestart:
		return program.CauseOperatorRestart
	case IntentWedgeRestart:
		return program.CauseWedgeRestart
	case IntentStop:
		return program.CauseOperatorStop
	case IntentRSSDrain:
		return program.CauseRSSWatchdog
	case IntentStartTimeout:
		return program.CauseStartTimeout
	case IntentProtocolCrash, IntentProtocolFatal:
		return program.CauseUnknown // the status's why says what the protocol found
	}
	switch {
	case end.OOMKilled:
		return program.CauseOOMKill
	case end.Unknown:
		return program.CauseUnknown // an adopted run: its status went to another parent
	case DaemonFault(end.SpawnErr):
		return program.CauseDaemonResources
	case end.SpawnErr != nil:
		return program.CauseSpawnFailed
	case end.Signaled && end.Signal == syscall.SIGKILL:
		return program.CauseOOMOrKill // tend's own SIGKILLs always carry an intent
	case end.Signaled && end.Signal == syscall.SIGTERM:
		return program.CauseGraceful
	case end.Signaled:
		return program.CauseUnknown
	case end.Code == s.RSSExitCode:
		return program.CauseRSSWatchdog
	case s.IsCleanCode(end.Code):
		return program.CauseCleanExit
	case end.Code == 1:
		return program.CauseRuntimeError
	}
	return program.CauseUnknown
}

// hasCode reports whether the run exited with a readable code.
func hasCode(end program.Exit) bool { return end.SpawnErr == nil && !end.Signaled && !end.Unknown }

func exitedWith(end program.Exit, code int) bool { return hasCode(end) && end.Code == code }

func fatalCode(s *program.Spec, end program.Exit) bool {
	return hasCode(end) && s.IsFatalCode(end.Code)
}
