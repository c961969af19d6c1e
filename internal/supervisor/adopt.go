package supervisor

import (
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/restart"
)

// Adoption is a run an earlier daemon started and left running.
type Adoption struct {
	PID        int
	StartTicks uint64 // /proc/PID/stat field 22, recorded at its spawn
	Run        int
	StartedAt  time.Time
	// TTYFD, when > 0, is the master of the run's terminal, inherited (tend
	// upgrade hands it on): the instance owns it from here. Else a tty
	// run's master comes from the Keeper.
	TTYFD int
	// Found: runs.json had no record of it; its cgroup or the output FIFOs
	// it holds named it (docs/daemon.md#damaged-records). Run is then 0:
	// its number is the intent record's, if any.
	Found bool
}

// SetAdoptions hands the manager the runs to adopt, by instance id: an
// instance created for one of those ids takes over the run instead of
// starting a new one (or, if the run has ended, counts its end). It
// returns nothing; Adopted says how it went.
func (m *Manager) SetAdoptions(a map[string]Adoption) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.adopt = a
}

// Unclaimed returns (and forgets) the adoptions no instance took: runs of
// programs that are no longer configured.
func (m *Manager) Unclaimed() map[string]Adoption {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.adopt
	m.adopt = nil
	return a
}

// Offered lists the ids of the adoptions no instance has taken yet (runs
// left alone, offered again), without forgetting them.
func (m *Manager) Offered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.adopt))
	for id := range m.adopt {
		ids = append(ids, id)
	}
	return ids
}

// Adopted is how many runs instances have taken over.
func (m *Manager) Adopted() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.adopted
}

// claimLocked takes the adoption for id, if any.
func (m *Manager) claimLocked(id string) (Adoption, bool) {
	a, ok := m.adopt[id]
	if ok {
		delete(m.adopt, id)
	}
	return a, ok
}

// adoptRun takes over a recorded run: the reaper watches it through a pidfd
// (after checking it is still the recorded process), its output FIFO is
// read again, and its watchdogs start over. False if it cannot be verified
// (it has ended, or its pid names another process now): then it is left
// alone, never signalled, and endOver counts its end.
func (in *Instance) adoptRun(a Adoption) bool {
	err := in.deps.Reaper.Adopt(a.PID, a.StartTicks, in.putExit)
	if err != nil {
		return false
	}
	in.runs = a.Run
	in.cur = &run{pid: a.PID, n: a.Run, started: a.StartedAt, adopted: true}
	in.state = program.StateRunning
	in.adoptTTY(a)
	if err := in.out.Attach(); err != nil {
		in.out.Note("cannot read the adopted run's output: " + err.Error())
	}
	if err := in.openNotify(); err != nil { // the same path as the run's NOTIFY_SOCKET
		in.out.Note("no notify socket for the adopted run: " + err.Error())
	}
	in.startHealth(time.Now())
	in.state, in.r.ready = program.StateRunning, true // it was started (and ready) before
	if in.startT != nil {
		in.startT.Stop()
		in.startT = nil
	}
	in.record()
	return true
}

// record tells the daemon which run is in place (pid 0: none).
func (in *Instance) record() {
	in.unrecorded = false
	if in.deps.Record == nil {
		return
	}
	if r := in.cur; r != nil {
		in.deps.Record(in.id, r.pid, r.n, r.started)
	} else {
		in.deps.Record(in.id, 0, 0, time.Time{})
	}
}

// endOver counts the end of a recorded run that was over before this
// daemon could hold it (it died while no daemon watched): as an adopted
// run's end, with the status unknown, after which the restart policy
// decides. It is never started again as if nothing had happened. was is
// what restore made of the intent record: firstStop, the operator had
// stopped it, and it stays stopped; firstRestart, tend itself was
// stopping it (a reload), and its end is that restart's, not a crash. It
// returns what the instance does first: nothing, the policy has decided.
func (in *Instance) endOver(a Adoption, was first) first {
	in.cur = &run{pid: a.PID, n: a.Run, started: a.StartedAt, adopted: true}
	switch was {
	case firstStop:
		in.cur.intent = restart.IntentStop
	case firstRestart:
		in.cur.intent = restart.IntentOperatorRestart
	}
	in.state = program.StateRunning
	st := reaper.Status{PID: a.PID, Adopted: true, At: time.Now()}
	// With cgroups, what the run left in its group is killed first, as
	// for any run's end (the group holds this instance's runs alone).
	// Without, nothing is: its pid may be another process's now.
	if in.group == nil || in.drain(st) {
		in.finish(st)
	}
	return firstNothing
}
