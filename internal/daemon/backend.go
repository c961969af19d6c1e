package daemon

import (
	"context"
	"path/filepath"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/broker"
	"github.com/tend-sh/tend/internal/doctor"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/supervisor"
)

// backend serves the API from the daemon's manager and broker.
type backend struct{ d *daemon }

var _ api.Backend = (*backend)(nil)

func (b *backend) List(agentsOnly bool, labels program.LabelSelector) (api.Statuses, func()) {
	l := b.d.broker.Listing(agentsOnly, labels)
	return l, l.Written
}

func (b *backend) Status(sel string, labels program.LabelSelector) ([]program.Status, error) {
	ids, err := b.d.matching(sel, labels)
	if err != nil {
		return nil, err
	}
	out := make([]program.Status, 0, len(ids))
	for _, id := range ids {
		if st, err := b.d.broker.Status(id); err == nil { // gone since: not in the answer
			out = append(out, st)
		}
	}
	return out, nil
}

func (b *backend) Add(spec program.Spec, source []byte) ([]string, error) {
	return b.d.addProgram(spec, source)
}

func (b *backend) Remove(ctx context.Context, name string, opts program.RemoveOptions) error {
	return b.d.removeAndForget(ctx, name, opts)
}

func (b *backend) Start(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.actOn(ctx, sel, opts, b.d.mgr.Start)
}

func (b *backend) Restart(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.actOn(ctx, sel, opts, b.d.mgr.Restart)
}

func (b *backend) Stop(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.actOn(ctx, sel, opts, b.d.mgr.Stop)
}

// result turns the manager's outcomes into the API's answer: with Wait,
// each instance's status once done, and for those that did not get there
// the status's why (or that the wait ran out).
func (b *backend) result(outs []supervisor.Outcome, err error) func(program.ActOptions) (program.ActResult, error) {
	return func(opts program.ActOptions) (program.ActResult, error) {
		if err != nil {
			return program.ActResult{}, err
		}
		b.d.intents.Sync() // what the operator decided is on disk before the answer
		res := program.ActResult{IDs: make([]string, len(outs))}
		for i, o := range outs {
			res.IDs[i] = o.ID
			if !opts.Wait {
				continue
			}
			st, serr := b.d.broker.Status(o.ID)
			if serr == nil {
				res.Statuses = append(res.Statuses, st)
			}
			switch {
			case !o.Done:
				res.Failed = append(res.Failed, program.ActFailure{ID: o.ID, Why: "timed out: " + st.Why})
			case !o.OK:
				res.Failed = append(res.Failed, program.ActFailure{ID: o.ID, Why: st.Why})
			}
		}
		return res, nil
	}
}

func (b *backend) Scale(ctx context.Context, name string, n int) ([]string, error) {
	ids, err := b.d.scaleProgram(ctx, name, n)
	b.d.intents.Sync()
	return ids, err
}

// Readiness counts the instances that should run: all but those the
// operator stopped, those that never autostart and have not been started,
// and those done (exited with restart = "on-failure" or "never"). Until the
// fleet's initial start is done the daemon is not ready, whatever the counts.
func (b *backend) Readiness() program.Readiness {
	var r program.Readiness
	for _, st := range b.d.broker.Briefs() { // no derivation, no /proc: /readyz may be polled often
		if !b.shouldRun(&st) {
			continue
		}
		r.Instances++
		if st.Alive && st.Ready && st.State == program.StateRunning {
			r.ReadyN++
		} else {
			r.NotReady = append(r.NotReady, st.ID)
		}
	}
	r.Ready = r.ReadyN == r.Instances && b.d.started.Load()
	if why := b.d.intentTrouble(); why != "" {
		r.Ready, r.Why = false, why // decisions are refused meanwhile
	}
	return r
}

func (b *backend) shouldRun(st *broker.Brief) bool {
	switch st.State {
	case program.StateExited:
		return false
	case program.StateStopped:
		if st.Ended {
			return false // stopped by the operator
		}
		spec, ok := b.d.mgr.Spec(st.Program)
		return ok && spec.Autostart // not started yet
	}
	return true
}

func (b *backend) Reload() (api.ReloadResult, error) { return b.d.reload() }

func (b *backend) Shutdown() { b.d.requestStop() }

func (b *backend) ParseProgram(body []byte) (program.Spec, error) {
	return b.d.defaults.Load().ParseProgramJSON(body, filepath.Dir(b.d.cfg.File))
}

// reload re-reads the config file and applies its programs. A config with
// errors changes nothing. The [daemon] table is read only at start.
//
// Reloads apply one at a time (applyMu), but the bookkeeping lock that
// tend add, rm and scale share (reloadMu) is held only while the new specs
// are worked out, not while Apply waits for stops: an agent's turn may hold
// a stop for its whole turn_grace.
func (d *daemon) reload() (api.ReloadResult, error) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.reloadMu.Lock()
	cfg, defaults, text, err := loadConfig(d.cfg.File, nil)
	if err != nil {
		d.reloadMu.Unlock()
		return api.ReloadResult{}, err
	}
	if err := d.checkLimits(cfg, cfg.Programs); err != nil {
		d.reloadMu.Unlock()
		return api.ReloadResult{}, err
	}
	d.defaults.Store(defaults)
	d.cfgText = text
	specs := d.reloadSpecs(cfg.Programs, defaults)
	d.reloadMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.stopBudget())
	defer cancel()
	diff, err := d.mgr.Apply(ctx, specs)
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseReloaded}})
	res := api.ReloadResult{Added: diff.Added, Removed: diff.Removed, Changed: diff.Changed, Unchanged: diff.Unchanged}
	if cfg.Daemon != d.cfg.Daemon {
		d.note("reload: [daemon] changes take effect at the next tend up")
	}
	return res, err
}

// eventSource adapts the event log to the API's interface.
type eventSource struct{ log *events.Log }

func (e eventSource) Since(since uint64, limit int) ([]program.Event, error) {
	return e.log.Since(since, limit)
}

func (e eventSource) Subscribe(since uint64) api.Subscription { return e.log.Subscribe(since) }

func (e eventSource) LastSeq() uint64 { return e.log.LastSeq() }

func (b *backend) Doctor(since time.Duration) (*program.DoctorReport, error) {
	now := time.Now()
	rep, err := doctor.Scan(b.d.state.Audit, now.Add(-since), now)
	if err != nil {
		return nil, err
	}
	rep.Tracking, rep.TrackingWhy = b.d.tracking, b.d.trackingWhy
	rep.Advice = append(b.d.storageAdvice(), rep.Advice...) // what cannot be kept now comes first
	rep.Advice = append(rep.Advice, b.d.damageAdvice()...)
	rep.Advice = append(rep.Advice, b.d.ptyAdvice()...)
	if rep.Tracking != program.TrackingCgroup {
		rep.Advice = append(rep.Advice, "runs are tracked by process group and tree, not cgroups ("+rep.TrackingWhy+
			"): a process that leaves both is ended only if tend saw it; for full containment run tend as root on a cgroup v2 host, or as the shipped systemd unit (Delegate=yes)")
	}
	return rep, nil
}
