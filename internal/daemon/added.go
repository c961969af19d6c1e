package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
)

// instances sums the instances of specs.
func instances(specs ...[]program.Spec) int {
	n := 0
	for _, list := range specs {
		for _, s := range list {
			n += s.Instances
		}
	}
	return n
}

// ttyInstances counts the instances of the specs that run in a terminal.
func ttyInstances(specs ...[]program.Spec) int {
	n := 0
	for _, list := range specs {
		for _, s := range list {
			if s.Tty {
				n += s.Instances
			}
		}
	}
	return n
}

// names is the set of the specs' names.
func names(specs []program.Spec) map[string]bool {
	m := make(map[string]bool, len(specs))
	for _, s := range specs {
		m[s.Name] = true
	}
	return m
}

// keptSpecs is kept.specs for the daemon's config, noting the problems.
func (d *daemon) keptSpecs(cfgPrograms []program.Spec, defaults *config.Defaults) []program.Spec {
	specs, problems := d.kept.Specs(defaults, filepath.Dir(d.cfg.File), names(cfgPrograms), func(name string) (*program.Spec, bool) {
		if d.mgr == nil {
			return nil, false
		}
		return d.mgr.Spec(name)
	})
	for _, p := range problems {
		d.note("%s", p)
	}
	return specs
}

// addProgram adds a program sent over the API and keeps it: in
// programs.json before any of its runs starts, so none is ever a stray of
// the next daemon. One reload, add, forget or scale at a time (reloadMu).
func (d *daemon) addProgram(spec program.Spec, source []byte) ([]string, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if _, ok := d.mgr.Spec(spec.Name); ok {
		return nil, fmt.Errorf("%w: %s", program.ErrExists, spec.Name)
	}
	if err := d.checkLimits(nil, []program.Spec{spec}); err != nil {
		return nil, err
	}
	if err := d.kept.PutDurable(spec.Name, source, !spec.RemoveOnExit); err != nil {
		return nil, fmt.Errorf("%w: keeping %s in %s: %w", program.ErrNotKept, spec.Name, d.kept.Path(), err)
	}
	ids, err := d.mgr.Add(spec)
	if err != nil {
		d.kept.Forget(spec.Name)
	}
	return ids, err
}

// removeProgram forgets a program and stops it. It is forgotten first, so
// that a daemon that dies meanwhile does not bring it back; and the removal
// goes on when the client gives up waiting for the stop (a cancelled tend
// rm), so the program still leaves the list once its runs have ended.
func (d *daemon) removeProgram(ctx context.Context, name string) error {
	d.reloadMu.Lock()
	wasKept, err := d.kept.ForgetDurable(name, !d.transient(name))
	d.reloadMu.Unlock()
	if err != nil { // still kept: a next daemon would bring it back, so it is not removed
		return fmt.Errorf("%w: forgetting %s in %s: %w", program.ErrNotKept, name, d.kept.Path(), err)
	}
	done := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), d.stopBudget())
		defer cancel()
		done <- d.mgr.Remove(rctx, name)
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if wasKept && errors.Is(err, program.ErrNotFound) {
		return nil // kept aside, never started: forgetting was all
	}
	return err
}

// scaleProgram scales a program; a kept one keeps its new count.
func (d *daemon) scaleProgram(ctx context.Context, name string, n int) ([]string, error) {
	d.reloadMu.Lock()
	spec, ok := d.mgr.Spec(name)
	if ok {
		if _, err := d.kept.SetInstances(name, n); err != nil {
			d.reloadMu.Unlock()
			return nil, fmt.Errorf("%w: keeping the scale of %s in %s: %w", program.ErrNotKept, name, d.kept.Path(), err)
		}
	}
	d.reloadMu.Unlock() // not held while the scale waits for stops
	ids, err := d.mgr.Scale(ctx, name, n)
	if ok && errors.Is(err, program.ErrNotKept) {
		_, _ = d.kept.SetInstances(name, spec.Instances) // the scale was refused: the kept count as it was
	}
	return ids, err
}

// loadKept reads programs.json and parses its programs with the config's
// [defaults], before anything starts.
func (d *daemon) loadKept() error {
	k, problems, err := kept.OpenPrograms(d.state.Root, time.Now())
	if err != nil {
		return err
	}
	d.kept = k
	for _, p := range problems {
		d.note("%s", p)
	}
	d.added = d.keptSpecs(d.cfg.Programs, d.defaults.Load())
	return nil
}

// reloadSpecs is the fleet a reload applies: the config's programs, then
// the kept ones it does not name, parsed with its [defaults].
func (d *daemon) reloadSpecs(cfgPrograms []program.Spec, defaults *config.Defaults) []program.Spec {
	return slices.Concat(cfgPrograms, d.keptSpecs(cfgPrograms, defaults))
}

// settleKept gives the programs a damaged programs.json left unknown, and
// whose runs or intent records were left alone (names), an entry of
// their own, kept aside until an operator decides, and says so in one
// line (docs/daemon.md#damaged-records).
func (d *daemon) settleKept(names []string) {
	_, aside := d.kept.Lost()
	slices.Sort(names)
	lost, err := d.kept.Settle(slices.Compact(names))
	if err != nil {
		d.note("%s: %v", d.kept.Path(), err)
	}
	if len(lost) > 0 {
		d.note("programs %s, added over the API, were lost with the damaged %s (set aside as %s): kept by name, not started, their runs left alone and their records kept until tend add NAME gives one back or tend rm NAME forgets it", strings.Join(lost, ", "), kept.ProgramsFile, aside)
	}
}

// damageAdvice is tend doctor's line on what a damaged programs.json left
// undecided, if anything.
func (d *daemon) damageAdvice() []string {
	lost, unknown := d.kept.Lost()
	switch {
	case len(lost) > 0:
		return []string{fmt.Sprintf("programs %s, added over the API, were lost with a damaged %s and are kept by name only, their runs left alone: tend add NAME gives one back (its body may be in a %s.corrupt-* file), tend rm NAME forgets it", strings.Join(lost, ", "), d.kept.Path(), kept.ProgramsFile)}
	case unknown != "":
		return []string{fmt.Sprintf("%s was damaged (set aside as %s): runs of programs tend does not know are left alone", d.kept.Path(), unknown)}
	}
	return nil
}
