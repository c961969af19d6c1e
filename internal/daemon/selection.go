package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/supervisor"
)

// Selection by label (-l, ?label=): labels belong to programs, so a
// selector narrowed by labels names whole programs (or the one instance
// NAME:K names).

// matching lists the ids sel names whose program's labels match, sorted;
// an unknown sel wraps program.ErrNotFound, a selection that matches
// nothing is empty.
func (d *daemon) matching(sel string, labels program.LabelSelector) ([]string, error) {
	ids, err := d.mgr.Resolve(sel)
	if err != nil || len(labels) == 0 {
		return ids, err
	}
	verdict := map[string]bool{} // by program: one lookup each
	return slices.DeleteFunc(ids, func(id string) bool {
		name, _, _ := program.SplitID(id)
		ok, seen := verdict[name]
		if !seen {
			spec, found := d.mgr.Spec(name)
			ok = found && labels.Matches(spec.Labels)
			verdict[name] = ok
		}
		return !ok
	}), nil
}

// targets turns a selection narrowed by labels into the selectors to act
// on: each matching program's name, or sel itself for one instance.
func (d *daemon) targets(sel string, labels program.LabelSelector) ([]string, error) {
	ids, err := d.matching(sel, labels)
	if err != nil {
		return nil, err
	}
	if _, _, one := program.SplitID(sel); one {
		return ids, nil
	}
	var out []string
	for _, id := range ids {
		if name, _, _ := program.SplitID(id); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// actOn runs an operator action on a selection: as it is without labels,
// else on each matching target at once, the outcomes in id order.
func (b *backend) actOn(ctx context.Context, sel string, opts program.ActOptions,
	do func(context.Context, string, program.ActOptions) ([]supervisor.Outcome, error)) (program.ActResult, error) {
	if len(opts.Labels) == 0 {
		return b.result(do(ctx, sel, opts))(opts)
	}
	targets, err := b.d.targets(sel, opts.Labels)
	if err != nil {
		return program.ActResult{}, err
	}
	outs := make([][]supervisor.Outcome, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { outs[i], _ = do(ctx, t, opts) }) // gone since: not in the answer
	}
	wg.Wait()
	all := slices.Concat(outs...)
	slices.SortFunc(all, func(x, y supervisor.Outcome) int { return compareIDs(x.ID, y.ID) })
	return b.result(all, nil)(opts)
}

// compareIDs orders ids as the manager lists them: by program, then by
// instance number.
func compareIDs(x, y string) int {
	nx, kx, _ := program.SplitID(x)
	ny, ky, _ := program.SplitID(y)
	if nx != ny {
		if nx < ny {
			return -1
		}
		return 1
	}
	return kx - ky
}

// RemoveMatching implements api.Backend.
func (b *backend) RemoveMatching(ctx context.Context, name string, labels program.LabelSelector, opts program.RemoveOptions) ([]string, error) {
	var names []string
	if name != "" {
		spec, ok := b.d.mgr.Spec(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", program.ErrNotFound, name)
		}
		if labels.Matches(spec.Labels) {
			names = append(names, name)
		}
	} else {
		for _, spec := range b.d.mgr.Specs() {
			if labels.Matches(spec.Labels) {
				names = append(names, spec.Name)
			}
		}
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = b.d.removeAndForget(ctx, n, opts) })
	}
	wg.Wait()
	var removed []string
	for i, n := range names {
		switch {
		case errs[i] == nil, errors.Is(errs[i], program.ErrNotFound): // gone meanwhile is removed too
			removed = append(removed, n)
		case ctx.Err() != nil:
			return removed, ctx.Err()
		default:
			return removed, errs[i]
		}
	}
	return removed, nil
}

// Signal implements api.Backend: sig to the process group of each running
// instance sel names. The reaper holds a run's pid until it is reaped, so
// the signal never reaches a process that took over the number.
func (b *backend) Signal(sel string, sig syscall.Signal) ([]string, error) {
	ids, err := b.d.mgr.Resolve(sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		st, err := b.d.broker.Status(id)
		if err != nil || st.PID == nil {
			continue
		}
		if b.d.reaper.Signal(*st.PID, sig, true) == nil {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no instance of %s is running", program.ErrNotRunning, sel)
	}
	return out, nil
}

// Hold implements api.Backend.
func (b *backend) Hold(name string) api.Hold { return b.d.sessions.hold(name) }

// OutputSettled implements api.Backend: both streams of the first run
// have ended and been written, or the instance's output is closed (gone).
func (b *backend) OutputSettled(id string) bool {
	n, ok := b.d.capture.StreamEnds(id)
	return !ok || n >= 2
}

// LogSources implements api.Backend: each instance's log, as its writer
// sees it.
func (b *backend) LogSources(sel string, labels program.LabelSelector) ([]logfile.Source, error) {
	ids, err := b.d.matching(sel, labels)
	if err != nil {
		return nil, err
	}
	out := make([]logfile.Source, 0, len(ids))
	for _, id := range ids {
		src := logfile.Source{ID: id, Log: b.d.capture.Log(id)}
		if name, _, ok := program.SplitID(id); ok {
			if spec, ok := b.d.mgr.Spec(name); ok {
				src.TTY = spec.Tty // its log is read as text lines, not records
				src.Protocol = spec.Protocol != program.ProtocolNone
			}
		}
		out = append(out, src)
	}
	return out, nil
}
