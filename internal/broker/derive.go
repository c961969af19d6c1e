package broker

import (
	"fmt"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Derive completes a supervisor's snapshot into the full status at now:
// uptime, turn, lifecycle and why. It is pure: the same snapshot and time
// give the same status.
func Derive(s program.Snapshot, now time.Time) program.Status {
	st := s.Status
	st.Labels = specLabels(s.Spec)
	if st.Labels == nil {
		st.Labels = noLabels
	}
	st.ComputedAt = program.Time{Time: now}
	st.Processes = []program.Process{}
	st.Tracking = program.TrackingNone
	alive := st.PID != nil
	if alive {
		st.UptimeMS = now.Sub(st.StartedAt.Time).Milliseconds()
		if s.Spec != nil && st.Degraded && now.Sub(st.StartedAt.Time) > s.Spec.StableRunReset {
			st.Degraded = false // this run has outlived stable_run_reset
		}
	}
	if s.TTY != nil {
		st.TTY = s.TTY()
	}
	var proto program.ProtocolReport
	if s.Protocol != nil {
		proto = s.Protocol()
		st.Protocol = program.ProtocolACP
		if s.Spec != nil {
			st.Protocol = s.Spec.Protocol
		}
		st.SessionID = proto.SessionID
		errs := proto.Errors
		st.ProtocolErrors = &errs
		if alive {
			st.Waiting = proto.Waiting
		}
	}
	st.TurnActive = alive && turnActive(s, now)
	if alive && !s.TurnWait.IsZero() {
		st.TurnWaitUntil = &program.Time{Time: s.TurnWait}
	}
	st.Lifecycle = Lifecycle(st.State, alive, st.Agent, st.TurnActive, st.LastExit)
	st.Why = why(s, &st, now)
	if s.Protocol != nil {
		st.Why = protocolWhy(s, &st, proto)
	}
	return st
}

// noLabels is the labels of a status whose program has none: {} in JSON,
// not null. Shared and never written.
var noLabels = map[string]string{}

func turnActive(s program.Snapshot, now time.Time) bool {
	if !s.Status.Agent {
		return false
	}
	idle := program.DefaultTurnIdleAfter
	if s.Spec != nil && s.Spec.TurnIdleAfter > 0 {
		idle = s.Spec.TurnIdleAfter
	}
	var last time.Time
	if s.LastOutput != nil {
		last = s.LastOutput()
	}
	return program.TurnActive(s.Turn, last, idle, now)
}

// Lifecycle is the coarse state (docs/status.md#state-and-lifecycle), one pure function of the rest:
// alive and in a turn (or not an agent) is running; alive agent between turns
// is idle; not alive after a clean exit or an operator stop (or never
// started) is done; not alive after a failure is error.
func Lifecycle(state string, alive, agent, turnActive bool, last *program.LastExit) string {
	if alive {
		if turnActive || !agent {
			return program.LifecycleRunning
		}
		return program.LifecycleIdle
	}
	switch state {
	case program.StateBackoff, program.StateFatal:
		return program.LifecycleError
	case program.StateStarting:
		return program.LifecycleRunning // a spawn is under way
	}
	if last == nil || last.LikelyCause == program.CauseCleanExit || last.LikelyCause == program.CauseOperatorStop {
		return program.LifecycleDone
	}
	if state == program.StateStopped {
		return program.LifecycleDone // stopped by the operator after whatever came before
	}
	return program.LifecycleError
}

// why is one plain sentence a person can act on.
func why(s program.Snapshot, st *program.Status, now time.Time) string {
	spec := s.Spec
	if spec == nil {
		spec = &program.Spec{}
	}
	switch st.State {
	case program.StateRunning, program.StateStarting:
		w := "up " + Human(time.Duration(st.UptimeMS)*time.Millisecond)
		if st.State == program.StateStarting {
			w = fmt.Sprintf("starting for %s, waiting for READY=1 (start_timeout %s)", Human(time.Duration(st.UptimeMS)*time.Millisecond), Human(spec.StartTimeout))
		}
		if wg := st.Wedge; wg != nil && !wg.PausedUntil.IsZero() {
			w += fmt.Sprintf("; wedged (%s): %s; wedge restarts paused until %s (more than wedge_loop_budget %d in %s)",
				wg.Source, wg.Detail, wg.PausedUntil.UTC().Format("15:04:05"), spec.WedgeLoopBudget, Human(spec.WedgeLoopWindow))
		}
		if st.Degraded {
			w += fmt.Sprintf("; degraded: %d crashes reached max_crashes %d", st.CrashCount, spec.MaxCrashes)
		}
		if h := history(st.Restarts); h != "" {
			w += "; " + h + " since start"
		}
		return w
	case program.StateStopping:
		return stoppingWhy(s, st, spec, now)
	case program.StateBackoff:
		return backoffWhy(s, st, spec, now)
	case program.StateFatal:
		if st.LastExit != nil && st.LastExit.Code != nil && spec.IsFatalCode(*st.LastExit.Code) {
			return fmt.Sprintf("gave up: exit %d is in fatal_exit_codes; fix it, then tend start %s", *st.LastExit.Code, st.ID)
		}
		return fmt.Sprintf("gave up after %d crashes (hard_max_crashes %d): %s; fix it, then tend start %s",
			st.CrashCount, spec.HardMaxCrashes, exitText(st.LastExit), st.ID)
	case program.StateExited:
		return fmt.Sprintf("exited: %s; restart = %q", exitText(st.LastExit), spec.Restart)
	}
	if st.LastExit == nil {
		if spec.Autostart {
			return "not started yet"
		}
		return "not started (autostart = false); tend start " + st.ID
	}
	return "stopped by the operator; tend start " + st.ID
}

func stoppingWhy(s program.Snapshot, st *program.Status, spec *program.Spec, now time.Time) string {
	if !s.TurnWait.IsZero() {
		what := "stop"
		if s.Stopping == "restart" {
			what = "restart"
		}
		left := max(s.TurnWait.Sub(now), 0).Round(time.Second)
		return fmt.Sprintf("waiting for the turn to end before %s (%s left of turn_grace %s)", what, Human(left), Human(spec.TurnGrace))
	}
	kill := program.SignalName(spec.StopSignal) + ", SIGKILL after " + Human(spec.StopGrace)
	switch s.Stopping {
	case "restart":
		return "restarting: sent " + kill
	case "wedge":
		detail := "wedged"
		if st.Wedge != nil {
			detail = "wedged: " + st.Wedge.Detail
		}
		return detail + ", restarting: sent SIGTERM, SIGKILL after " + Human(spec.WedgeRestartGrace)
	case "rss":
		return fmt.Sprintf("memory %s over max_rss %s, draining: sent %s", Size(st.PeakRSS), Size(spec.MaxRSS), kill)
	case "start_timeout":
		if s.Protocol != nil { // a protocol agent is ready once it has a session (docs/protocol.md)
			return fmt.Sprintf("no session within start_timeout %s, stopping: sent %s", Human(spec.StartTimeout), kill)
		}
		return fmt.Sprintf("no READY=1 within start_timeout %s, stopping: sent %s", Human(spec.StartTimeout), kill)
	case "stop":
		return "stopping: sent " + kill
	case "protocol":
		// tend's own stop, not the run's: the protocol failed
		// (docs/protocol.md#states); the run's end completes the why.
		what := s.ProtocolWhy
		if what == "" {
			what = "the protocol failed"
		}
		return fmt.Sprintf("stopping the run after its protocol failed (%s): sent %s", what, kill)
	}
	return "stopping: the run sent STOPPING=1"
}

// protocolWhy says what a protocol agent waits for, or why the protocol
// ended its last run (docs/protocol.md#states).
func protocolWhy(s program.Snapshot, st *program.Status, p program.ProtocolReport) string {
	w := st.Why
	switch {
	case st.State == program.StateStarting && st.PID != nil && p.Starting != "":
		return fmt.Sprintf("starting for %s, waiting for the agent's answer to %s (start_timeout %s)",
			Human(time.Duration(st.UptimeMS)*time.Millisecond), p.Starting, Human(s.Spec.StartTimeout))
	case st.Waiting != nil:
		opts := make([]string, len(st.Waiting.Options))
		for i, o := range st.Waiting.Options {
			opts[i] = o.OptionID + " (" + o.Kind + ")"
		}
		return fmt.Sprintf("%s; waiting for permission: %s (%s), request %s, options %s: tend approve %s [OPTION_ID] or tend deny %s",
			w, st.Waiting.Title, st.Waiting.ToolKind, st.Waiting.RequestID, strings.Join(opts, ", "), st.ID, st.ID)
	case s.ProtocolWhy == "":
		return w
	case st.State == program.StateFatal && s.Spec != nil && s.Spec.HardMaxCrashes > 0 && st.CrashCount >= s.Spec.HardMaxCrashes:
		// A crash loop of refused handshakes: how many, then why (an
		// agent that needs authentication is fatal at once, uncounted).
		return strings.Replace(w, "; fix it, then", "; "+s.ProtocolWhy+"; fix it, then", 1)
	case st.State == program.StateFatal:
		return s.ProtocolWhy + "; fix it, then tend start " + st.ID
	case st.State == program.StateStopping && s.Stopping == "protocol":
		return w // stoppingWhy says it
	case st.State == program.StateStopping:
		return w + "; its protocol had failed: " + s.ProtocolWhy
	case st.State == program.StateBackoff, st.State == program.StateExited:
		return w + "; " + s.ProtocolWhy
	}
	return w
}

// Size prints bytes the way people read them: 2.1 GiB, 73.4 MiB, 512 KiB.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func backoffWhy(s program.Snapshot, st *program.Status, spec *program.Spec, now time.Time) string {
	left := st.NextStartAt.Sub(now)
	if left < 0 {
		left = 0
	}
	in := Human(left.Round(100 * time.Millisecond))
	reason := ""
	if s.Backoff != nil {
		reason = s.Backoff.Reason
	}
	switch reason {
	case program.ReasonRSSWatchdog:
		return fmt.Sprintf("backing off %s after a memory drain: %s; rss_backoff %s", in, exitText(st.LastExit), Human(spec.RSSBackoff))
	case program.ReasonBudgetExceeded:
		return fmt.Sprintf("backing off %s: more than %d clean exits in %s (clean_restart_budget)", in, spec.CleanRestartBudget, Human(spec.CleanRestartWindow))
	}
	if st.CrashCount > spec.MaxCrashes {
		return fmt.Sprintf("backing off %s after crash %d, degraded past max_crashes %d: %s", in, st.CrashCount, spec.MaxCrashes, exitText(st.LastExit))
	}
	return fmt.Sprintf("backing off %s after crash %d of %d: %s", in, st.CrashCount, spec.MaxCrashes, exitText(st.LastExit))
}

// exitText says how a run ended: "exit 1 (runtime_error)", "SIGKILL (oom_or_external_kill)".
func exitText(e *program.LastExit) string {
	switch {
	case e == nil:
		return "no exit yet"
	case e.Signal != nil:
		return fmt.Sprintf("%s (%s)", *e.Signal, e.LikelyCause)
	case e.Code != nil:
		return fmt.Sprintf("exit %d (%s)", *e.Code, e.LikelyCause)
	}
	return "did not start (" + e.LikelyCause + ")"
}

// history summarises restarts: "1 crash and 1 memory drain".
func history(r program.Restarts) string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(r.Crash, "crash", "crashes")
	add(r.RSSWatchdog, "memory drain", "memory drains")
	add(r.WedgeRestart, "wedge restart", "wedge restarts")
	add(r.CleanExit, "clean exit", "clean exits")
	add(r.OperatorRestart, "operator restart", "operator restarts")
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Human prints a duration the way people write it: 1m21s, 8s, 350ms, 2h5m.
func Human(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
