package daemon

import (
	"time"

	"github.com/tend-sh/tend/internal/broker"
)

// stopBound is how long stopping every instance may take: the largest
// turn_grace (an agent's turn may hold its stop that long, docs/operations.md#turn-aware-stop) plus the
// largest stop_grace (then SIGKILL), over the programs running now, those
// added over the API included.
func (d *daemon) stopBound() time.Duration {
	var turn, grace time.Duration
	for _, s := range d.mgr.Specs() {
		turn, grace = max(turn, s.TurnGrace), max(grace, s.StopGrace)
	}
	return turn + grace
}

// stopBudget bounds a shutdown or a reload's stops: stopBound plus room for
// the kernel to tear processes down.
func (d *daemon) stopBudget() time.Duration {
	return max(d.stopBound(), 10*time.Second) + 30*time.Second
}

// announceStop says at the start of a shutdown how long it can take, so an
// operator (or the orchestrator's grace period) knows what to expect.
func (d *daemon) announceStop() {
	n := 0
	for _, st := range d.broker.Briefs() {
		if st.Alive {
			n++
		}
	}
	if n > 0 {
		d.note("stopping %d instances: at most %s (the largest turn_grace plus the largest stop_grace, then SIGKILL)", n, broker.Human(d.stopBound()))
	}
}
