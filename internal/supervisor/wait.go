package supervisor

import "github.com/tend-sh/tend/internal/program"

// goal is where an operator command waits for the instance to get (docs/cli.md#verbs-that-wait:
// start, stop and restart wait until done).
type goal int

const (
	goalTaken   goal = iota // answered once the command has been applied and reported
	goalRunning             // start: a run running and ready, or the start failed
	goalNewRun              // restart: a run started after the command, running and ready
	goalRest                // stop: no run and nothing starting (every process gone)
)

// waiter is a command waiting for its goal. after is the instance's spawn
// attempt count when the command was taken: a later attempt is the command's
// doing (or a restart's).
type waiter struct {
	goal  goal
	after int
	reply chan bool // capacity 1: exactly one answer
}

// settleWaiters answers the waiters whose goal is reached or out of reach.
// It runs after every report, so an answer never precedes the state it
// speaks of.
func (in *Instance) settleWaiters() {
	keep := in.waiters[:0]
	for _, w := range in.waiters {
		if done, ok := in.reached(w); done {
			w.reply <- ok
		} else {
			keep = append(keep, w)
		}
	}
	clear(in.waiters[len(keep):])
	in.waiters = keep
}

// reached says whether w is done, and if so whether it got its goal.
func (in *Instance) reached(w waiter) (done, ok bool) {
	r := in.cur
	switch w.goal {
	case goalTaken:
		return true, true
	case goalRest:
		if r == nil && in.atRest() {
			return true, true
		}
		// Started again (by another command) before it came to rest.
		return r != nil && r.attempt > w.after && !r.signalled && in.state == program.StateRunning, false
	}
	if r != nil && (w.goal == goalRunning || r.attempt > w.after) {
		if r.signalled {
			return false, false // ending; what follows decides
		}
		return in.state == program.StateRunning && in.r.ready, true
	}
	switch {
	case r != nil || in.spawnDue:
		return false, false // the old run is still ending, or the new one about to start
	case in.attempts > w.after:
		return in.state != program.StateStarting, false // the new run failed or ended
	}
	return in.atRest(), false // stopped (by another command) before it could start
}

// atRest reports whether no run is in place and none is coming.
func (in *Instance) atRest() bool {
	switch in.state {
	case program.StateStopped, program.StateExited, program.StateFatal:
		return !in.spawnDue
	}
	return false
}

// releaseWaiters answers whatever still waits when the instance is gone:
// a stop got its goal, anything else did not.
func (in *Instance) releaseWaiters() {
	for _, w := range in.waiters {
		w.reply <- w.goal == goalRest || w.goal == goalTaken
	}
	in.waiters = nil
}
