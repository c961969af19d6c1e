package daemon

import (
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/supervisor"
)

// openRuns reads the runs an earlier daemon of this state dir left (if it
// died without stopping them), hands the live ones to the manager to adopt,
// and starts this daemon's record with all of them: one no instance claims
// stays recorded until it is known to have ended (docs/daemon.md#runsjson: no run recorded
// alive is ever started a second time). Live runs it has no record of (it
// was lost or damaged) are looked for too (findUnrecorded), except after
// an upgrade, which hands every run over. Only a runs.json that is damaged
// and cannot be set aside stops the daemon.
func (d *daemon) openRuns(look bool) error {
	loaded, err := runs.Load(d.state.Root, time.Now())
	if err != nil {
		return err
	}
	for _, p := range loaded.Problems {
		d.note("%s", p)
	}
	var live []runs.Record
	adopt := map[string]supervisor.Adoption{}
	for _, r := range loaded.Records {
		// An ended run is offered too: its instance counts its end (and
		// does not start it again as if nothing had happened).
		adopt[r.ID] = supervisor.Adoption{PID: r.PID, StartTicks: r.StartTicks, Run: r.Run, StartedAt: r.StartedAt}
		if !ended(r.PID, r.StartTicks) {
			live = append(live, r)
		}
	}
	if look {
		for id, a := range d.findUnrecorded(adopt) {
			adopt[id] = a
		}
	}
	d.mgr.SetAdoptions(adopt)
	d.runs = runs.Open(d.state.Root, live)
	return nil
}

// ended reports whether a recorded run is certainly over: its pid is gone,
// or names another process now.
func ended(pid int, startTicks uint64) bool {
	ticks, err := reaper.StartTicks(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && ticks != startTicks
}

// record is the supervisors' Record hook: it keeps runs.json current.
func (d *daemon) record(id string, pid, run int, started time.Time) {
	if pid == 0 {
		d.runs.Delete(id)
		return
	}
	ticks, err := reaper.StartTicks(pid)
	if err != nil {
		d.runs.Delete(id) // already gone
		return
	}
	d.runs.Set(runs.Record{ID: id, PID: pid, StartTicks: ticks, Run: run, StartedAt: started})
}

// settleAdoptions announces what was adopted and deals with the runs no
// instance claimed. Those of programs that may yet come back (kept aside,
// or possibly in a damaged programs.json) are left alone and offered again
// for adoption, so a later tend add or reload of the program takes them
// over instead of starting a second copy. The verified runs of programs
// this daemon no longer has are stopped, each staying in runs.json until
// it has ended; unverifiable ones are never signalled. So are those found
// without a record and without cgroups (by the FIFOs they hold): what
// they are is a guess, so they are left alone, reported, and offered
// again (docs/daemon.md#damaged-records). It returns the names of the
// programs whose runs it left alone and that this daemon does not have.
func (d *daemon) settleAdoptions() (alone []string) {
	n := d.mgr.Adopted()
	if n > 0 {
		d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseAdopted, Count: &n}})
	}
	later := map[string]supervisor.Adoption{}
	for id, a := range d.mgr.Unclaimed() {
		if name, _, ok := program.SplitID(id); ok && d.kept.LeaveAlone(name) {
			if !ended(a.PID, a.StartTicks) {
				d.note("leaving %s (pid %d) alone: its program was added over the API and cannot be read now", id, a.PID)
			}
			if _, ok := d.mgr.Spec(name); !ok {
				alone = append(alone, name)
			}
			later[id] = a
			continue
		}
		if a.Found && d.cgroups == nil {
			if !ended(a.PID, a.StartTicks) {
				d.note("leaving pid %d alone: it holds the output of %s, which is not configured, and runs.json has no record of it", a.PID, id)
				later[id] = a
			}
			continue
		}
		done := make(chan struct{})
		err := d.reaper.Adopt(a.PID, a.StartTicks, func(reaper.Status) {
			d.runs.DeleteRun(id, a.PID)
			close(done)
		})
		if err != nil {
			if ended(a.PID, a.StartTicks) {
				d.runs.DeleteRun(id, a.PID)
			}
			continue
		}
		d.note("stopping %s (pid %d): left running by an earlier daemon, no longer configured", id, a.PID)
		d.strays.Add(1)
		go func() {
			defer d.strays.Done()
			d.signalStray(id, a.PID, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				d.signalStray(id, a.PID, syscall.SIGKILL)
				<-done
			}
			d.removeGroupOf(id) // what the stray started goes with it
			d.removeFIFOsOf(id)
		}()
	}
	if len(later) > 0 {
		d.mgr.SetAdoptions(later)
	}
	d.keeper.settle(later)
	return alone
}
