package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/doctor"
	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
)

// When the state directory cannot be written (docs/daemon.md#when-the-disk-fills)
// the daemon keeps supervising and says so out loud: a stderr line once
// per cause and every minute while it lasts, tend_state_write_errors_total,
// /readyz (while the intent record cannot be kept), tend doctor, and a
// daemon degraded_storage event for each file once it can be written
// again. The writers (statedir.Table, WriteFileAtomic, the audit log)
// report to the directory's statedir.Health; watchStorage reads it.

// storageLook is how often the watcher looks at the health while a file
// fails (else it waits for the health to change); storageRepeat how often
// a failure that lasts is said again.
const (
	storageLook   = time.Second
	storageRepeat = time.Minute
)

// watchStorage runs until stop is closed.
func (d *daemon) watchStorage(stop <-chan struct{}) {
	h := d.state.Root.Health()
	said := map[string]struct { // by file: the cause last said, and when
		why string
		at  time.Time
	}{}
	for {
		now := time.Now()
		failing := h.Failing()
		for _, f := range failing {
			why := f.Cause
			s, ok := said[f.File]
			if ok && s.why == why && now.Sub(s.at) < storageRepeat {
				continue
			}
			if ok && s.why == why {
				d.note("still cannot write %s in the state directory (%d failed writes since %s): %v", f.File, f.Errors, f.Since.UTC().Format(time.RFC3339), f.Err)
			} else {
				d.note("cannot write %s in the state directory: %v; %s", f.File, f.Err, doctor.StorageConsequence(f.File))
			}
			said[f.File] = struct {
				why string
				at  time.Time
			}{why, now}
		}
		for _, f := range h.Healed() {
			if _, ok := said[f.File]; ok { // a failure over before it was looked at is not said twice
				d.note("%s in the state directory can be written again, after %d failed writes since %s", f.File, f.Errors, f.Since.UTC().Format(time.RFC3339))
				delete(said, f.File)
			}
			if f.File == "audit" {
				continue // the audit log marks its own gap, with the seqs lost
			}
			since := program.Time{Time: f.Since}
			d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{
				Phase: program.PhaseDegradedStorage, File: f.File, Errors: f.Errors, Since: &since, Error: f.Err.Error(),
			}})
		}
		var again <-chan time.Time // while a file fails: to say it again in time
		if len(failing) > 0 {
			again = time.After(storageLook)
		}
		select {
		case <-h.Changed():
		case <-again:
		case <-stop:
			return
		}
	}
}

// intentTrouble is why the intent record cannot be kept now, or "".
func (d *daemon) intentTrouble() string {
	for _, f := range d.state.Root.Health().Failing() {
		if f.File == kept.IntentFile+".log" { // the journal: while it takes every change, nothing is lost
			return fmt.Sprintf("the intent record (%s) cannot be written: %v", f.File, f.Err)
		}
	}
	return ""
}

// stateWriteErrors is tend_state_write_errors_total's source: the
// failures by file, the audit log's counted by the log itself.
func (d *daemon) stateWriteErrors() map[string]uint64 {
	m := d.state.Root.Health().Errors()
	if n := d.log.WriteErrors(); n > 0 {
		m["audit"] = n
	}
	for k := range m {
		if strings.HasPrefix(k, "audit/") { // seq.next: the audit log's too
			m["audit"] += m[k]
			delete(m, k)
		}
	}
	return m
}

// storageAdvice is tend doctor's lines on what cannot be written now.
func (d *daemon) storageAdvice() []string {
	return doctor.Storage(d.state.Root.Health().Failing(), time.Now())
}
