package daemon

import (
	"path/filepath"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/supervisor"
)

// openRuns reads the runs an earlier daemon of this state dir left (if it
// died without stopping them), hands them to the manager to adopt, and
// starts this daemon's own record.
func (d *daemon) openRuns() {
	path := filepath.Join(d.cfg.Daemon.StateDir, "runs.json")
	recs, err := runs.Load(path)
	if err != nil {
		d.note("runs.json unreadable, adopting nothing: %v", err)
	}
	adopt := map[string]supervisor.Adoption{}
	for _, r := range recs {
		adopt[r.ID] = supervisor.Adoption{PID: r.PID, StartTicks: r.StartTicks, Run: r.Run, StartedAt: r.StartedAt}
	}
	d.mgr.SetAdoptions(adopt)
	d.runs = runs.Open(path, nil)
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

// settleAdoptions announces what was adopted and stops the verified runs of
// programs this config no longer has; unverifiable ones are never signalled.
func (d *daemon) settleAdoptions() {
	n := d.mgr.Adopted()
	if n > 0 {
		d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseAdopted, Count: &n}})
	}
	for id, a := range d.mgr.Unclaimed() {
		done := make(chan struct{})
		if err := d.reaper.Adopt(a.PID, a.StartTicks, func(reaper.Status) { close(done) }); err != nil {
			continue
		}
		d.note("stopping %s (pid %d): left running by an earlier daemon, no longer configured", id, a.PID)
		d.strays.Add(1)
		go func() {
			defer d.strays.Done()
			_ = d.reaper.Signal(a.PID, syscall.SIGTERM, true)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = d.reaper.Signal(a.PID, syscall.SIGKILL, true)
				<-done
			}
		}()
	}
}
