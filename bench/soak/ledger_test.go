//go:build soak

package soak

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/runs"
)

// runRef names one run: its instance, pid and the seq of its spawned event
// (pid alone does not name a run: pid_max may be 32768, and pids come back).
type runRef struct {
	id  string
	pid int
	seq uint64
}

func (r runRef) String() string {
	return fmt.Sprintf("%s pid %d (spawned at seq %d)", r.id, r.pid, r.seq)
}

// ledger replays an audit log: seq must go 1, 2, 3, ... and, per instance,
// spawned and exited must alternate, each exited naming the pid of the run
// in place. Runs of a killed daemon that the next one adopts have their
// spawned from the first and their exited from the second daemon.
type ledger struct {
	events          int
	last            uint64
	spawned, exited int
	adopted         int               // runs the daemon said it adopted ("daemon adopted" count)
	open            map[string]runRef // the run in place, by instance id
	excused         map[runRef]string // runs that may lack an exited, with why (see excuse)
	lost            []string          // excused runs that did lack one
	problems        []string
}

func newLedger(excused map[runRef]string) *ledger {
	return &ledger{open: map[string]runRef{}, excused: excused}
}

func (l *ledger) problem(format string, args ...any) {
	if len(l.problems) < 50 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

func (l *ledger) add(e program.Event) {
	if e.Seq != l.last+1 {
		l.problem("seq %d follows seq %d", e.Seq, l.last)
	}
	l.events++
	l.last = e.Seq
	switch d := e.Data.(type) {
	case *program.Spawned:
		l.spawned++
		if prev, ok := l.open[e.ID]; ok {
			l.unended(prev, fmt.Sprintf("a new run (pid %d) was spawned at seq %d", d.PID, e.Seq))
		}
		l.open[e.ID] = runRef{e.ID, d.PID, e.Seq}
	case *program.Exited:
		if d.PID == 0 {
			return // a spawn that never launched: its exited follows spawn_failed
		}
		l.exited++
		cur, ok := l.open[e.ID]
		if !ok || cur.pid != d.PID {
			l.problem("exited at seq %d: %s pid %d, but the run in place is %v", e.Seq, e.ID, d.PID, cur)
			return
		}
		delete(l.open, e.ID)
	case *program.DaemonPhase:
		if d.Phase == program.PhaseAdopted && d.Count != nil {
			l.adopted += *d.Count
		}
	}
}

// unended records that run got no exited: a problem unless excused.
func (l *ledger) unended(run runRef, what string) {
	if why, ok := l.excused[run]; ok {
		l.lost = append(l.lost, fmt.Sprintf("%v: %s", run, why))
		return
	}
	l.problem("%v has no exited: %s", run, what)
}

// replay is a ledger over events.
func replay(events []program.Event, excused map[runRef]string) *ledger {
	l := newLedger(excused)
	for _, e := range events {
		l.add(e)
	}
	return l
}

// excuse looks at the runs in place when the daemon was SIGKILLed (from the
// audit log it left) beside runs.json (what the next daemon adopts from),
// and returns those that may end without an exited event, with why. Two
// windows exist, both of a few milliseconds:
//
//   - a run spawned just before the kill may not be in runs.json yet (its
//     writes are coalesced, see package runs): the next daemon does not know
//     it. A crasher then ends on its own, unseen; anything else would be
//     left running (the leak check at the end catches that).
//   - a run that ended just before the kill may have been reaped by the
//     killed daemon before its exited was written: its pid is gone.
//
// A run that ends while no daemon runs is not in this list: this process
// leaves its zombie in place until the next daemon has adopted it, so that
// daemon sees it end (likely_cause "unknown").
func excuse(open map[string]runRef, recs []runs.Record) map[runRef]string {
	byID := map[string]runs.Record{}
	for _, rec := range recs {
		byID[rec.ID] = rec
	}
	out := map[runRef]string{}
	for _, id := range slices.Sorted(maps.Keys(open)) {
		run := open[id]
		rec, ok := byID[id]
		if !ok || rec.PID != run.pid {
			out[run] = "not yet in runs.json when the daemon was killed"
			continue
		}
		if p, err := readProc(run.pid); err != nil || p.start != rec.StartTicks {
			out[run] = "gone (reaped by the killed daemon) when it was killed"
		}
	}
	return out
}
