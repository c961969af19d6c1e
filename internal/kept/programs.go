package kept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// ProgramsFile is the file in the state dir keeping the programs added
// over the API.
const ProgramsFile = "programs.json"

// entry is one program added over the API, as it is stored.
type entry struct {
	Name      string          `json:"name"`
	Body      json.RawMessage `json:"body"`                // the POST /v1/programs body, as sent
	Instances *int            `json:"instances,omitempty"` // set by tend scale, over the body's
	// Lost: a program known only by its name, its entry lost with a
	// damaged programs.json while a run or an intent record of it was
	// left; kept aside (no Body) until tend add or tend rm decides.
	Lost bool `json:"lost,omitempty"`
	// Damaged, on a line of its own (no Name): programs.json was damaged
	// and set aside as this file, and the programs it held are not all
	// known yet; a run of a program tend does not know is left alone
	// rather than stopped. Written so that a daemon killed before Settle
	// still knows (docs/daemon.md#damaged-records).
	Damaged string `json:"damaged,omitempty"`
}

// Programs holds the programs added over the API: operator intent, so
// they are part of the fleet until tend rm, across daemon restarts and
// reloads. Each is kept as its request body, in the order added, in
// programs.json (replaced atomically and flushed to disk at each change),
// and parsed again with the current [defaults] at each start and reload.
// A body that no longer parses (a key renamed in a later tend) is kept
// aside: not started, its runs left alone, until tend rm forgets it or
// tend add replaces it.
type Programs struct {
	dir *statedir.Dir

	mu    sync.Mutex      // guards list, aside, unknown and the file
	list  []entry         // in the order added
	aside map[string]bool // names whose body did not parse at the last start or reload, or was lost
	// unknown: programs.json was damaged (set aside as this file), and
	// a run of a program tend does not know may be one of its programs.
	unknown string
}

// OpenPrograms reads programs.json. One that does not parse whole is set
// aside (programs.json.corrupt-<UTC stamp>), never written over, the
// entries on its lines that parse are kept, and the runs and intent
// records of programs no longer known are then left alone rather than
// stopped or dropped, until Settle names them: programs.json is written
// back with a mark saying so, so that a daemon killed before Settle does
// not take the file for whole (docs/daemon.md#damaged-records). The
// error is returned only when a bad file cannot be set aside.
func OpenPrograms(dir *statedir.Dir, now time.Time) (k *Programs, problems []string, err error) {
	list, damage, err := statedir.ReadLines[entry](dir, ProgramsFile, now)
	if err != nil {
		return nil, nil, err
	}
	k = &Programs{dir: dir, aside: map[string]bool{}, list: clean(list)}
	for _, p := range list {
		if p.Damaged != "" && p.Name == "" {
			k.unknown = p.Damaged
		}
	}
	if damage == nil {
		if k.unknown != "" {
			problems = append(problems, fmt.Sprintf("%s was damaged and set aside as %s before a daemon could name what it held; runs of programs tend does not know are left alone", k.Path(), k.unknown))
		}
		return k, problems, nil
	}
	k.unknown = damage.Aside
	why := damage.Err
	if damage.Read {
		why = statedir.Unsafe(why)
	}
	problems = append(problems, fmt.Sprintf("%s is damaged (%v); set aside as %s, %d programs added over the API read from its intact lines; runs and records of programs tend does not know are kept and left alone, not stopped", k.Path(), oneLine(why), damage.Aside, len(k.list)))
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.saveLocked(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", k.Path(), err))
	}
	return k, problems, nil
}

// Path is programs.json's path, for messages.
func (k *Programs) Path() string { return k.dir.Join(ProgramsFile) }

// clean drops the entries without a valid name, an object body (but for
// a lost one) or a count of instances in bounds, and the damage mark; of
// two with one name, the later counts.
func clean(list []entry) []entry {
	var out []entry
	for _, p := range list {
		body := bytes.TrimSpace(p.Body)
		if p.Lost && (len(body) == 0 || string(body) == "null") {
			p.Body, p.Instances, p.Damaged = nil, nil, ""
			body = []byte("{}")
		}
		if !program.ValidName(p.Name) || len(body) == 0 || body[0] != '{' || (p.Instances != nil && (*p.Instances < 0 || *p.Instances > program.MaxInstances)) {
			continue
		}
		p.Damaged = ""
		if i := slices.IndexFunc(out, func(q entry) bool { return q.Name == p.Name }); i >= 0 {
			out[i] = p
			continue
		}
		out = append(out, p)
	}
	return out
}

// saveLocked replaces programs.json with the list, flushed to disk with the
// directory entry: a program added is there after a power cut too.
func (k *Programs) saveLocked() error { return k.saveLockedDurable(true) }

// saveLockedDurable is saveLocked, without the flushes unless durable: a
// change that concerns only a remove_on_exit program need not survive a
// power cut, which ends its run too (and a next daemon drops such a
// program whose run is gone), while a daemon's crash leaves the file as
// written. The flushes are most of what adding one costs.
func (k *Programs) saveLockedDurable(durable bool) error {
	list := k.list
	if k.unknown != "" {
		list = append(slices.Clip(list), entry{Damaged: k.unknown})
	}
	return k.dir.WriteFileAtomic(ProgramsFile, statedir.MarshalLines(list), 0o600, durable)
}

// Settle ends what a damaged programs.json left unknown, once the daemon
// has taken up its fleet: each name (of a run or an intent record left
// alone because its program was not known) that has no entry gets a lost
// one, kept aside, and the damage mark goes, in one write. Until an
// operator decides (tend add NAME gives the program back, tend rm NAME
// forgets it), a lost program's runs stay alone and its records kept,
// across restarts too. It returns the names it kept.
func (k *Programs) Settle(names []string) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unknown == "" {
		return nil, nil
	}
	var lost []string
	for _, n := range names {
		if program.ValidName(n) && k.index(n) < 0 {
			k.list = append(k.list, entry{Name: n, Lost: true})
			k.aside[n] = true
			lost = append(lost, n)
		}
	}
	k.unknown = ""
	return lost, k.saveLocked()
}

// Lost returns the names of the programs known only by name (Settle),
// and the set-aside file while what a damaged programs.json held is not
// yet known: what tend doctor names.
func (k *Programs) Lost() (names []string, unknown string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.list {
		if p.Lost {
			names = append(names, p.Name)
		}
	}
	return names, k.unknown
}

// Specs parses every kept program with defaults (relative paths against
// baseDir), skipping those the config names (taken as the config's):
// those are forgotten. A body that does not parse is kept aside with a
// problem line; one whose program is running (running) keeps its spec
// instead.
func (k *Programs) Specs(defaults *config.Defaults, baseDir string, configured map[string]bool, running func(name string) (*program.Spec, bool)) (specs []program.Spec, problems []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(k.list)
	k.list = slices.DeleteFunc(k.list, func(p entry) bool {
		if configured[p.Name] {
			problems = append(problems, fmt.Sprintf("program %s of the config replaces the one added over the API", p.Name))
			return true
		}
		return false
	})
	if len(k.list) != n {
		if err := k.saveLocked(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", k.Path(), err))
		}
	}
	clear(k.aside)
	for _, p := range k.list {
		if p.Lost {
			problems = append(problems, fmt.Sprintf("program %s (added over the API) was lost with a damaged %s: kept aside, not started, its runs left alone (tend add %s gives it back, tend rm %s forgets it)", p.Name, ProgramsFile, p.Name, p.Name))
			k.aside[p.Name] = true
			continue
		}
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

// Put keeps a program added over the API, replacing one of the same name.
func (k *Programs) Put(name string, body []byte) error { return k.PutDurable(name, body, true) }

// PutDurable is Put, flushed to disk or not (see saveLockedDurable).
func (k *Programs) PutDurable(name string, body []byte, durable bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := entry{Name: name, Body: slices.Clone(body)}
	was, wasAside := slices.Clone(k.list), k.aside[name]
	if i := k.index(name); i >= 0 {
		k.list[i] = p
	} else {
		k.list = append(k.list, p)
	}
	delete(k.aside, name)
	if err := k.saveLockedDurable(durable); err != nil {
		k.list = was // not kept, so not changed (docs/daemon.md#when-the-disk-fills)
		if wasAside {
			k.aside[name] = true
		}
		return err
	}
	return nil
}

// Forget drops a kept program; false if there was none of that name.
func (k *Programs) Forget(name string) (bool, error) { return k.ForgetDurable(name, true) }

// ForgetDurable is Forget, flushed to disk or not (see saveLockedDurable).
func (k *Programs) ForgetDurable(name string, durable bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := k.index(name)
	if i < 0 {
		return false, nil
	}
	was, wasAside := slices.Clone(k.list), k.aside[name]
	k.list = slices.Delete(k.list, i, i+1)
	delete(k.aside, name)
	if err := k.saveLockedDurable(durable); err != nil {
		k.list = was // not kept, so not changed
		if wasAside {
			k.aside[name] = true
		}
		return true, err
	}
	return true, nil
}

// SetInstances records a kept program's instance count (tend scale); false
// if there is no such kept program.
func (k *Programs) SetInstances(name string, n int) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := k.index(name)
	if i < 0 {
		return false, nil
	}
	was := k.list[i].Instances
	k.list[i].Instances = &n
	if err := k.saveLocked(); err != nil {
		k.list[i].Instances = was // not kept, so not changed
		return true, err
	}
	return true, nil
}

// index is the position of name in the list, or -1; the caller holds mu.
func (k *Programs) index(name string) int {
	return slices.IndexFunc(k.list, func(q entry) bool { return q.Name == name })
}

// LeaveAlone reports whether a run of an unconfigured program must be left
// alone rather than stopped as a stray: its program is kept aside, or
// programs.json was damaged and it may have been one of them.
func (k *Programs) LeaveAlone(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unknown != "" || k.aside[name]
}

// oneLine joins a multi-line message (config errors) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
