package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/doctor"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/supervisor"
)

// backend serves the API from the daemon's manager and broker.
type backend struct{ d *daemon }

var _ api.Backend = (*backend)(nil)

func (b *backend) List(agentsOnly bool) []program.Status { return b.d.broker.List(agentsOnly) }

func (b *backend) Status(sel string) ([]program.Status, error) {
	ids, err := b.d.mgr.Resolve(sel)
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

func (b *backend) Remove(ctx context.Context, name string) error { return b.d.removeProgram(ctx, name) }

func (b *backend) Start(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	ids, err := b.d.mgr.Start(sel)
	return program.ActResult{IDs: ids}, err
}

func (b *backend) Restart(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	ids, err := b.d.mgr.Restart(sel)
	return program.ActResult{IDs: ids}, err
}

func (b *backend) Stop(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	ids, err := b.d.mgr.Stop(ctx, sel)
	return program.ActResult{IDs: ids}, err
}

func (b *backend) Scale(ctx context.Context, name string, n int) ([]string, error) {
	return b.d.scaleProgram(ctx, name, n)
}

// Readiness counts the instances that should run: autostart ones that are
// not stopped by the operator and not done.
func (b *backend) Readiness() program.Readiness {
	var r program.Readiness
	for _, st := range b.d.broker.List(false) {
		switch st.State {
		case program.StateStopped, program.StateExited:
			continue
		}
		r.Instances++
		if st.Alive() && st.Ready && st.State == program.StateRunning {
			r.ReadyN++
		} else {
			r.NotReady = append(r.NotReady, st.ID)
		}
	}
	r.Ready = r.ReadyN == r.Instances
	return r
}

func (b *backend) Reload() (api.ReloadResult, error) { return b.d.reload() }

func (b *backend) Shutdown() { b.d.requestStop() }

func (b *backend) LogPath(id string) (string, error) {
	if _, _, ok := program.SplitID(id); !ok {
		return "", fmt.Errorf("%w: %q is not an instance id (NAME:K)", program.ErrNotFound, id)
	}
	if _, err := b.d.broker.Status(id); err != nil {
		return "", err
	}
	return supervisor.LogPath(filepath.Join(b.d.cfg.Daemon.StateDir, "logs"), id), nil
}

func (b *backend) ParseProgram(body []byte) (program.Spec, error) {
	return b.d.defaults.Load().ParseProgramJSON(body, filepath.Dir(b.d.cfg.File))
}

// reload re-reads the config file and applies its programs. A config with
// errors changes nothing. The [daemon] table is read only at start.
func (d *daemon) reload() (api.ReloadResult, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, defaults, err := config.LoadWithDefaults(d.cfg.File)
	if err != nil {
		return api.ReloadResult{}, err
	}
	d.defaults.Store(defaults)
	ctx, cancel := context.WithTimeout(context.Background(), d.stopBudget())
	defer cancel()
	diff, err := d.mgr.Apply(ctx, d.reloadSpecs(cfg.Programs, defaults))
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

func (b *backend) Doctor(since time.Duration) (*program.DoctorReport, error) {
	now := time.Now()
	return doctor.Scan(b.d.state.Audit, now.Add(-since), now)
}
