package supervisor

import (
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
)

// Turn-aware stop (docs/operations.md#turn-aware-stop): an operator stop or restart of an agent in the
// middle of a turn waits for the turn to end, at most turn_grace, before it
// signals the run. Meanwhile the instance is stopping, its why says what it
// waits for; a second stop with now ends the wait. Wedge and memory
// restarts never wait (they call endWith directly).

// startTurnWait begins the wait for intent if the run is an agent in a turn
// with a turn_grace; false if there is nothing to wait for.
func (in *Instance) startTurnWait(intent restart.Intent) bool {
	r := in.cur
	if !r.turnWait.IsZero() {
		r.intent = mergeIntent(r.intent, intent)
		return true // already waiting: the earlier deadline stands
	}
	now := time.Now()
	if in.spec.TurnGrace <= 0 || !in.turnActive(now) {
		return false
	}
	r.intent, r.turnWait = intent, now.Add(in.spec.TurnGrace)
	in.armTurnCheck(now)
	return true
}

// mergeIntent keeps a stop over a restart: a stop asked during a restart's
// wait must not come back.
func mergeIntent(old, new restart.Intent) restart.Intent {
	if new == restart.IntentStop || old == restart.IntentNone {
		return new
	}
	return old
}

// checkTurnWait ends the wait once the turn is over or the grace is spent,
// or sets the next look.
func (in *Instance) checkTurnWait() {
	r := in.cur
	now := time.Now()
	active := in.turnActive(now)
	if active && now.Before(r.turnWait) {
		in.armTurnCheck(now)
		return
	}
	if active {
		in.publish(program.KindHealthWarn, &program.HealthWarn{Reason: program.WarnTurnGrace, Count: 1, WindowMS: in.spec.TurnGrace.Milliseconds()})
	}
	intent := r.intent
	r.turnWait = time.Time{}
	in.endWith(intent, in.spec.StopSignal, in.spec.StopGrace)
}

// armTurnCheck wakes the loop at the grace's end, or sooner when the turn
// is read from output: when the silence that ends it would be complete.
// An X_TEND_TURN=idle wakes it through the notify socket instead.
func (in *Instance) armTurnCheck(now time.Time) {
	next := in.cur.turnWait
	if !in.turnSet {
		if quiet := in.activity().Add(in.turnIdleAfter()); quiet.Before(next) {
			next = quiet
		}
	}
	in.arm(max(next.Sub(now), time.Millisecond))
}

// turnActive is the agent's turn as the status reports it (docs/status.md#agents-and-their-turns): its
// X_TEND_TURN once it has sent one, else output within turn_idle_after.
func (in *Instance) turnActive(now time.Time) bool {
	if !in.spec.Agent || in.cur == nil {
		return false
	}
	return program.TurnActive(in.turnReport(), in.activity(), in.turnIdleAfter(), now)
}

func (in *Instance) turnIdleAfter() time.Duration {
	if d := in.spec.TurnIdleAfter; d > 0 {
		return d
	}
	return program.DefaultTurnIdleAfter
}
