package cgroup

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tend-sh/tend/internal/program"
)

// Limits are the resource limits of a run's group, which Prepare writes
// into it before the run starts. The zero value is no limit. Each field is
// one knob, described by its row in knobs; the package doc says how to add
// one.
type Limits struct {
	MemoryMax int64 // bytes; memory.max, past which the kernel OOM-kills in the group; 0 = none
}

// LimitsOf is the limits the program spec asks for.
func LimitsOf(s *program.Spec) Limits {
	return Limits{MemoryMax: s.MemoryMax}
}

// knob is one limit: where it comes from, what enforces it and how it is
// written.
type knob struct {
	key        string             // the program's config key, as config errors name it
	controller string             // the cgroup v2 controller that enforces it
	file       string             // the group's file Prepare writes it to
	get        func(Limits) int64 // the limit; 0 for none
	format     func(int64) string // the file's content for a limit; nil writes the number
}

// knobs are every limit Prepare writes. Where a knob's controller is on,
// each run's group gets the limit, or "max" (none) when it is 0, so that a
// limit taken out of the config is lifted at the next run.
var knobs = []knob{
	{key: "memory_max", controller: "memory", file: "memory.max", get: func(l Limits) int64 { return l.MemoryMax }},
}

// value is what Prepare writes to k's file for l.
func (k *knob) value(l Limits) string {
	v := k.get(l)
	switch {
	case v == 0:
		return "max"
	case k.format != nil:
		return k.format(v)
	}
	return strconv.FormatInt(v, 10)
}

// Refusal is a limit that runs on this host cannot have, and why.
type Refusal struct {
	Key string // the program's config key, e.g. "memory_max"
	Why string // one line a person can act on
}

// Unenforceable lists the limits of l that runs in t cannot have, in the
// order of knobs; none when all can be enforced. t is nil where runs get no
// cgroup at all, and whyNone then says why (Setup's why). A limit that
// cannot be enforced must be refused, never silently ignored: the daemon
// asks this at start, at reload and when a program is added, and reports
// each refusal as a config error.
func Unenforceable(t *Tree, whyNone string, l Limits) []Refusal {
	var rs []Refusal
	for i := range knobs {
		k := &knobs[i]
		if k.get(l) == 0 {
			continue
		}
		if t == nil {
			rs = append(rs, Refusal{k.key, "runs get no cgroup (" + whyNone + ")"})
		} else if !slices.Contains(t.controllers, k.controller) {
			rs = append(rs, Refusal{k.key, t.whyOff(k.controller)})
		}
	}
	return rs
}

// whyOff says why controller c is not on for the instance groups.
func (t *Tree) whyOff(c string) string {
	if why := t.off[c]; why != "" {
		return why
	}
	return "the " + c + " controller is not enabled for " + t.path
}

// check says what is wrong with l for this tree: a negative limit, or one
// whose controller is not on (the daemon refuses those before any run;
// this keeps Prepare from ever starting a run without its limit).
func (t *Tree) check(l Limits) error {
	for i := range knobs {
		if v := knobs[i].get(l); v < 0 {
			return fmt.Errorf("negative %s %d", knobs[i].key, v)
		}
	}
	if rs := Unenforceable(t, "", l); len(rs) > 0 {
		return fmt.Errorf("%s cannot be enforced here: %s", rs[0].Key, rs[0].Why)
	}
	return nil
}

// writeLimits writes l into the group at dir: every knob whose controller
// is on for the tree.
func (t *Tree) writeLimits(dir string, l Limits) error {
	for i := range knobs {
		k := &knobs[i]
		if !slices.Contains(t.controllers, k.controller) {
			continue
		}
		if err := writeFile(filepath.Join(dir, k.file), k.value(l)); err != nil {
			return fmt.Errorf("%s: %w", k.file, err)
		}
	}
	return nil
}
