package supervisor

import (
	"time"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
)

// The intent record (package kept): what the next daemon restores after
// this one stops uncleanly. An instance hands the record its state when
// something the record holds changed (report calls keep): a map store on
// the loop, the disk write is the record's writer's. The Manager restores
// each instance in one place, where instances are made (growLocked),
// beside the adoption of its run.

// keptState is what the intent record holds of an instance, in a form
// cheap to compare at every report: a change of any field is a new record.
type keptState struct {
	state    string
	stopped  bool // by the operator
	runs     int
	crashes  int
	degraded bool
	restarts program.Restarts
	last     *program.LastExit // a new value at every end of a run
	start    time.Time         // when that run started
	backoff  *program.Backoff
	next     time.Time
	session  string // a protocol agent's session
	turn     string // the prompt whose turn is under way
}

func (in *Instance) keptNow() keptState {
	return keptState{
		state: in.state, stopped: in.opStopped,
		runs: in.runs, crashes: in.hist.CrashCount, degraded: in.hist.Degraded, restarts: in.hist.Restarts,
		last: in.lastExit, start: in.lastStart, backoff: in.backoff, next: in.nextStart,
		session: in.proto.sessionID(), turn: in.proto.turnID(),
	}
}

// keep hands the intent record the instance's state if it changed since
// the last time.
func (in *Instance) keep() {
	if in.deps.Intents == nil || in.removing {
		return // a removed instance's record is deleted with it
	}
	now := in.keptNow()
	if now == in.kept {
		return
	}
	in.kept = now
	in.deps.Intents.Put(in.intentOf(now))
}

// intentOf is the intent record of the instance in state k.
func (in *Instance) intentOf(k keptState) kept.Intent {
	hist := in.hist.Keep(in.spec, time.Now())
	return kept.Intent{
		ID: in.id, Spec: in.digest, State: k.state, Stopped: k.stopped, Runs: k.runs,
		History: &hist, LastExit: k.last, LastStart: k.start, Backoff: k.backoff, NextStart: k.next,
		Session: k.session, Turn: k.turn,
	}
}

// commitDecision journals, durably, what an operator's command c will make
// of the instance, before the loop applies it: a decision the daemon
// cannot journal is refused and changes nothing (docs/daemon.md#when-the-disk-fills).
// Only the operator's own commands are journaled so (a start of the fleet
// or a stop a reload makes is the config's, not a decision to keep); and
// a command that changes nothing the record holds costs no write.
func (in *Instance) commitDecision(c command) error {
	if !c.operator || in.deps.Intents == nil || in.removing {
		return nil
	}
	k := in.keptNow()
	switch c.kind {
	case cmdStop:
		if k.stopped && in.cur == nil && k.state == program.StateStopped {
			return nil
		}
		k.stopped = true
		if in.cur != nil || k.state != program.StateExited && k.state != program.StateFatal {
			k.state = program.StateStopped
		}
		k.backoff, k.next = nil, time.Time{}
	case cmdStart, cmdRestart:
		if !k.stopped && (in.cur != nil || k.state == program.StateStarting || k.state == program.StateBackoff || k.state == program.StateRunning) {
			return nil // the record already says it should run
		}
		k.stopped = false
		if in.cur == nil {
			// What the next daemon starts: a record of a run that should be.
			k.state, k.backoff, k.next = program.StateStarting, nil, time.Time{}
		}
	default:
		return nil
	}
	return in.deps.Intents.Commit(in.intentOf(k))
}

// commitVerdict journals, durably, the policy's verdict that ends the
// instance's runs (fatal, or exited under restart = "never" or
// "on-failure") before anything announces it: a daemon killed the moment
// after a gave_up event must never run the instance again. state is the
// verdict; the instance's counters and last_exit are already its own. A
// verdict that cannot be journaled still stands in this daemon (its runs
// go on being supervised); the state directory's health says what was
// not kept.
func (in *Instance) commitVerdict(state string) {
	if in.deps.Intents == nil || in.removing {
		return
	}
	k := in.keptNow()
	k.state, k.backoff, k.next = state, nil, time.Time{}
	if in.deps.Intents.Commit(in.intentOf(k)) == nil {
		in.kept = k
	}
}

// verdictCovers says whether the intent record r holds a verdict of the
// policy (fatal, exited) that was made after run: runs.json may still name
// the run whose end made it (a daemon killed between the two writes),
// which is then over, and its end already counted.
func verdictCovers(r kept.Intent, digest string, run int) bool {
	return (r.State == program.StateFatal || r.State == program.StateExited) &&
		!r.Stopped && r.Spec == digest && r.Runs >= run
}

// first is what a new instance does once its creator lets it go.
type first int

const (
	firstNothing first = iota // at rest, running an adopted run, or in backoff with its timer armed
	firstStart
	firstStop    // the operator stopped it while its adopted run was being stopped
	firstRestart // tend was stopping its adopted run for good (a reload): finished as a restart
)

// firsts are the commands new instances start with.
type firsts struct{ starts, stops, restarts []*Instance }

func (f *firsts) add(o firsts) {
	f.starts = append(f.starts, o.starts...)
	f.stops = append(f.stops, o.stops...)
	f.restarts = append(f.restarts, o.restarts...)
}

// send sends each instance its first command.
func (f *firsts) send() (startReplies []chan bool) {
	sendAll(f.stops, cmdStop, program.ActOptions{})
	sendAll(f.restarts, cmdRestart, program.ActOptions{})
	return sendAll(f.starts, cmdStart, program.ActOptions{})
}

// keepRetiring records, before tend itself stops the run for good (a
// reload that replaces or removes its program, tend rm, a scale down),
// that the end to come is tend's, and writes it to the journal at once: a
// daemon killed before the run has ended leaves the next one a run whose
// end is a restart tend made, not a crash (restore, endOver).
func (in *Instance) keepRetiring() {
	if in.deps.Intents == nil || in.cur == nil {
		return
	}
	now := in.keptNow()
	in.kept = now
	hist := in.hist.Keep(in.spec, time.Now())
	in.deps.Intents.Put(kept.Intent{
		ID: in.id, Spec: in.digest, State: now.state, Stopped: now.stopped, Runs: now.runs,
		History: &hist, LastExit: now.last, LastStart: now.start, Backoff: now.backoff, NextStart: now.next, Retiring: true,
	})
	in.deps.Intents.Write()
}

// restore takes up an instance's intent record r (ok: there is one), with
// adopted saying whether its run was adopted, and says what it does first.
//
// Counters (crash_count, restarts, degraded, the budgets' windows),
// last_exit and the run number are restored whatever the spec. The
// operator's decisions stand too: a stopped instance stays stopped, and a
// stop under way is finished. The policy's verdicts (fatal, exited, a
// backoff and its deadline) stand only under the spec that made them: a
// program whose spec has changed since (its command fixed, its
// fatal_exit_codes or restart policy changed) starts, as a reload that
// changes it would start it, and the kept counters then count on.
func (in *Instance) restore(r kept.Intent, ok, adopted bool) first {
	if !ok {
		if adopted || !in.spec.Autostart {
			return firstNothing
		}
		return firstStart
	}
	if r.History != nil {
		in.hist = restart.Restore(*r.History)
	}
	in.lastExit, in.lastStart = r.LastExit, r.LastStart
	if !adopted {
		in.tty.EndedBefore(r.LastStart)
	}
	in.proto.restore(r.Session, r.Turn)
	in.runs = max(in.runs, r.Runs) // an adopted run's number may be the newer
	in.attempts = in.runs
	switch {
	case adopted && r.Stopped:
		in.opStopped = true
		return firstStop
	case adopted && r.Retiring:
		return firstRestart
	case adopted:
		return firstNothing
	case r.Stopped || r.State == program.StateStopped:
		in.state, in.opStopped = program.StateStopped, r.Stopped
		return firstNothing
	case r.Spec != in.digest:
		return firstStart
	case r.State == program.StateFatal || r.State == program.StateExited:
		in.state = r.State
		return firstNothing
	case r.State == program.StateBackoff && !r.NextStart.IsZero():
		// The remaining wait, then the start the backoff was for.
		in.state, in.backoff, in.nextStart = program.StateBackoff, r.Backoff, r.NextStart
		in.arm(max(time.Until(r.NextStart), 0))
		return firstNothing
	}
	return firstStart // running, starting, or stopping to restart: it ran, and should
}

// SetIntents hands the manager the intent record an earlier daemon left,
// by id (NAME:K for an instance, NAME for a program's scale): instances
// and programs made for those ids take them up.
func (m *Manager) SetIntents(recs map[string]kept.Intent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.intents = recs
}

// UnclaimedIntents returns (and forgets) the records no instance or
// program took up: of programs that are no longer configured.
func (m *Manager) UnclaimedIntents() map[string]kept.Intent {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.intents
	m.intents = nil
	return r
}

// claimIntentLocked takes the record of id, if any.
func (m *Manager) claimIntentLocked(id string) (kept.Intent, bool) {
	r, ok := m.intents[id]
	if ok {
		delete(m.intents, id)
	}
	return r, ok
}

// scaledLocked is spec with the instance count tend scale left in the
// intent record, if the config's count is still the one it was scaled
// from (else the config's, and the record goes).
func (m *Manager) scaledLocked(spec *program.Spec) *program.Spec {
	r, ok := m.claimIntentLocked(spec.Name)
	if !ok || r.Instances == nil {
		return spec
	}
	if r.Configured != spec.Instances {
		m.deps.Intents.Delete(spec.Name) // the config was changed since: it decides
		return spec
	}
	s := *spec
	s.Instances = *r.Instances
	return &s
}

// keepScale records an operator's scale of a program, durably: a scale
// that cannot be journaled is refused (docs/daemon.md#when-the-disk-fills).
func (m *Manager) keepScale(name string, n, configured int) error {
	return m.deps.Intents.Commit(kept.Intent{ID: name, Instances: &n, Configured: configured})
}
