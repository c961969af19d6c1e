package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// programsName is the file in the state dir keeping the programs added over
// the API.
const programsName = "programs.json"

// keptProgram is one program added over the API, as it is stored.
type keptProgram struct {
	Name      string          `json:"name"`
	Body      json.RawMessage `json:"body"`                // the POST /v1/programs body, as sent
	Instances *int            `json:"instances,omitempty"` // set by tend scale, over the body's
}

// kept holds the programs added over the API (SPEC 10): operator intent, so
// they are part of the fleet until tend rm, across daemon restarts and
// reloads. Each is kept as its request body, in the order added, in
// state_dir/programs.json (replaced atomically and flushed to disk at each
// change), and parsed again with the current [defaults] at each start and
// reload. A body that no longer parses (a key renamed in a later tend) is
// kept aside: not started, its runs left alone, until tend rm forgets it or
// tend add replaces it.
type kept struct {
	dir *statedir.Dir

	mu      sync.Mutex      // guards list, aside, unknown and the file
	list    []keptProgram   // in the order added
	aside   map[string]bool // names whose body did not parse at the last start or reload
	unknown bool            // programs.json was damaged: a run of a program tend does not know may be one of them
}

// openKept reads programs.json. One that does not parse whole is renamed
// aside (programs.json.corrupt-<UTC stamp>), the entries on its lines that
// parse are kept, and the runs of programs no longer known are then left
// alone rather than stopped. The error is returned only when a bad file
// cannot be set aside.
func openKept(dir *statedir.Dir, now time.Time) (k *kept, problems []string, err error) {
	k = &kept{dir: dir, aside: map[string]bool{}}
	b, rerr := dir.ReadFile(programsName)
	if errors.Is(rerr, fs.ErrNotExist) {
		return k, nil, nil
	}
	var perr error
	if rerr == nil {
		k.list, perr = parseKept(b)
		if perr == nil {
			return k, nil, nil
		}
	}
	k.unknown = true
	aside := programsName + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	for i := 2; ; i++ {
		if _, err := dir.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.corrupt-%s-%d", programsName, now.UTC().Format("20060102T150405Z"), i)
	}
	if err := dir.Rename(programsName, aside); err != nil {
		return nil, nil, fmt.Errorf("%s: %v, and it cannot be set aside: %w", dir.Join(programsName), errors.Join(rerr, perr), err)
	}
	why := perr
	if rerr != nil {
		why = unsafeFile(rerr)
	}
	problems = append(problems, fmt.Sprintf("%s is damaged (%v); set aside as %s, %d programs added over the API read from it; runs of programs tend does not know are left alone", dir.Join(programsName), oneLine(why), aside, len(k.list)))
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.saveLocked(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", dir.Join(programsName), err))
	}
	return k, problems, nil
}

// parseKept reads programs.json. A file that is not one JSON array of
// entries gives the entries of its lines that parse on their own (the file
// is written one entry a line) together with the error. Entries without a
// valid name or body are dropped; of two with one name, the later counts.
func parseKept(b []byte) ([]keptProgram, error) {
	var list []keptProgram
	err := json.Unmarshal(b, &list)
	if err != nil {
		list = nil
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			line = bytes.TrimSuffix(bytes.TrimSpace(line), []byte(","))
			var p keptProgram
			if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &p) == nil {
				list = append(list, p)
			}
		}
	}
	var out []keptProgram
	for _, p := range list {
		body := bytes.TrimSpace(p.Body)
		if !program.ValidName(p.Name) || len(body) == 0 || body[0] != '{' || (p.Instances != nil && (*p.Instances < 0 || *p.Instances > maxKeptInstances)) {
			continue
		}
		if i := slices.IndexFunc(out, func(q keptProgram) bool { return q.Name == p.Name }); i >= 0 {
			out[i] = p
			continue
		}
		out = append(out, p)
	}
	return out, err
}

// maxKeptInstances is SPEC 2's bound on instances.
const maxKeptInstances = 10000

// formatKept is programs.json's form: a JSON array, one entry a line.
func formatKept(list []keptProgram) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	for i, p := range list {
		var body bytes.Buffer
		if json.Compact(&body, p.Body) == nil { // one line, whatever the client sent
			p.Body = body.Bytes()
		}
		line, err := json.Marshal(p)
		if err != nil {
			continue
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

// saveLocked replaces programs.json with the list, flushed to disk with the
// directory entry: a program added is there after a power cut too.
func (k *kept) saveLocked() error { return k.saveLockedDurable(true) }

// saveLockedDurable is saveLocked, without the flushes unless durable: a
// change that concerns only a remove_on_exit program need not survive a
// power cut, which ends its run too (and a next daemon drops such a
// program whose run is gone), while a daemon's crash leaves the file as
// written. The flushes are most of what adding one costs.
func (k *kept) saveLockedDurable(durable bool) error {
	if err := k.dir.WriteFileAtomic(programsName, formatKept(k.list), 0o600, durable); err != nil || !durable {
		return err
	}
	return unix.Fsync(k.dir.FD())
}

// specs parses every kept program with defaults (relative paths against
// baseDir), skipping those the config names (taken as the config's):
// those are forgotten. A body that does not parse is kept aside with a
// problem line; with fallback, one that is running keeps its spec instead.
func (k *kept) specs(defaults *config.Defaults, baseDir string, configured map[string]bool, running func(name string) (*program.Spec, bool)) (specs []program.Spec, problems []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(k.list)
	k.list = slices.DeleteFunc(k.list, func(p keptProgram) bool {
		if configured[p.Name] {
			problems = append(problems, fmt.Sprintf("program %s of the config replaces the one added over the API", p.Name))
			return true
		}
		return false
	})
	if len(k.list) != n {
		if err := k.saveLocked(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", k.dir.Join(programsName), err))
		}
	}
	clear(k.aside)
	for _, p := range k.list {
		spec, err := defaults.ParseProgramJSON(p.Body, baseDir)
		if err == nil && spec.Name != p.Name {
			err = fmt.Errorf("its body names %q", spec.Name)
		}
		if err != nil {
			if cur, ok := running(p.Name); ok {
				problems = append(problems, fmt.Sprintf("program %s (added over the API) no longer parses, it keeps running as it is: %s", p.Name, oneLine(err)))
				specs = append(specs, *cur)
				continue
			}
			problems = append(problems, fmt.Sprintf("program %s (added over the API) no longer parses and is kept aside, not started (tend rm %s forgets it, tend add replaces it): %s", p.Name, p.Name, oneLine(err)))
			k.aside[p.Name] = true
			continue
		}
		if p.Instances != nil {
			spec.Instances = *p.Instances
		}
		specs = append(specs, spec)
	}
	return specs, problems
}

// put keeps a program added over the API, replacing one of the same name
// (durable: see saveLockedDurable).
func (k *kept) put(name string, body []byte, durable bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := keptProgram{Name: name, Body: slices.Clone(body)}
	if i := slices.IndexFunc(k.list, func(q keptProgram) bool { return q.Name == name }); i >= 0 {
		k.list[i] = p
	} else {
		k.list = append(k.list, p)
	}
	delete(k.aside, name)
	return k.saveLockedDurable(durable)
}

// forget drops a kept program; false if there was none of that name.
func (k *kept) forget(name string) (bool, error) { return k.forgetDurable(name, true) }

// forgetDurable is forget, durable or not (see saveLockedDurable).
func (k *kept) forgetDurable(name string, durable bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.IndexFunc(k.list, func(q keptProgram) bool { return q.Name == name })
	if i < 0 {
		return false, nil
	}
	k.list = slices.Delete(k.list, i, i+1)
	delete(k.aside, name)
	return true, k.saveLockedDurable(durable)
}

// setInstances records a kept program's instance count (tend scale); false
// if there is no such kept program.
func (k *kept) setInstances(name string, n int) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.IndexFunc(k.list, func(q keptProgram) bool { return q.Name == name })
	if i < 0 {
		return false, nil
	}
	k.list[i].Instances = &n
	return true, k.saveLocked()
}

// leaveAlone reports whether a run of an unconfigured program must be left
// alone rather than stopped as a stray: its program is kept aside, or
// programs.json was damaged and it may have been one of them.
func (k *kept) leaveAlone(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unknown || k.aside[name]
}

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
	specs, problems := d.kept.specs(defaults, filepath.Dir(d.cfg.File), names(cfgPrograms), func(name string) (*program.Spec, bool) {
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
	if err := d.checkMemoryMax([]program.Spec{spec}); err != nil {
		return nil, err
	}
	if err := d.kept.put(spec.Name, source, !spec.RemoveOnExit); err != nil {
		d.kept.forget(spec.Name)
		return nil, fmt.Errorf("keeping %s in %s: %w", spec.Name, d.state.Root.Join(programsName), err)
	}
	ids, err := d.mgr.Add(spec)
	if err != nil {
		d.kept.forget(spec.Name)
	}
	return ids, err
}

// removeProgram forgets a program and stops it. It is forgotten first, so
// that a daemon that dies meanwhile does not bring it back; and the removal
// goes on when the client gives up waiting for the stop (a cancelled tend
// rm), so the program still leaves the list once its runs have ended.
func (d *daemon) removeProgram(ctx context.Context, name string) error {
	d.reloadMu.Lock()
	wasKept, err := d.kept.forgetDurable(name, !d.transient(name))
	d.reloadMu.Unlock()
	if err != nil {
		d.note("forgetting %s in %s: %v", name, d.state.Root.Join(programsName), err)
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
	if _, ok := d.mgr.Spec(name); ok {
		if _, err := d.kept.setInstances(name, n); err != nil {
			d.note("keeping the scale of %s in %s: %v", name, d.state.Root.Join(programsName), err)
		}
	}
	d.reloadMu.Unlock()
	return d.mgr.Scale(ctx, name, n)
}

// oneLine joins a multi-line message (config errors) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// loadKept reads programs.json and parses its programs with the config's
// [defaults], then raises the descriptor limit for the whole fleet, all
// before anything starts.
func (d *daemon) loadKept() error {
	k, problems, err := openKept(d.state.Root, time.Now())
	if err != nil {
		return err
	}
	d.kept = k
	for _, p := range problems {
		d.note("%s", p)
	}
	d.added = d.keptSpecs(d.cfg.Programs, d.defaults.Load())
	d.raiseLimits(instances(d.cfg.Programs, d.added))
	return nil
}

// reloadSpecs is the fleet a reload applies: the config's programs, then
// the kept ones it does not name, parsed with its [defaults].
func (d *daemon) reloadSpecs(cfgPrograms []program.Spec, defaults *config.Defaults) []program.Spec {
	return slices.Concat(cfgPrograms, d.keptSpecs(cfgPrograms, defaults))
}
