package daemon

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/supervisor"
)

// findUnrecorded finds the live runs runs.json has no record of (it was
// lost or damaged, with its journal): a terminal's by the keeper, which
// holds its master with the run's pid and start time; others by their
// instance's cgroup, or without cgroups by the output FIFOs they hold
// open (runs.Holders). Each
// is offered for adoption like a recorded run, marked Found, so that its
// instance takes it over instead of starting a second copy beside it and
// (with cgroups) instead of killing it as it makes the group afresh
// (docs/daemon.md#damaged-records). One line says each.
func (d *daemon) findUnrecorded(recorded map[string]supervisor.Adoption) map[string]supervisor.Adoption {
	found := map[string]supervisor.Adoption{}
	take := func(id string, pids []int, where string) {
		leader, ok := runs.Leader(runs.ReadProcs(pids))
		if !ok {
			return
		}
		found[id] = supervisor.Adoption{PID: leader.PID, StartTicks: leader.StartTicks, StartedAt: runs.StartedAt(leader.StartTicks), Found: true}
		d.note("runs.json has no record of %s, but %s holds its run: pid %d, taken as the run (of %d processes)", id, where, leader.PID, len(pids))
	}
	for id, r := range d.keeper.held() {
		if _, rec := recorded[id]; !rec && !ended(r.PID, r.Ticks) {
			found[id] = supervisor.Adoption{PID: r.PID, StartTicks: r.Ticks, StartedAt: runs.StartedAt(r.Ticks), Found: true}
			d.note("runs.json has no record of %s, but the keeper holds its terminal: pid %d, taken as the run", id, r.PID)
		}
	}
	if d.cgroups != nil {
		names, err := d.cgroups.Names()
		if err != nil {
			d.note("looking for runs not in runs.json: %v", err)
			return found
		}
		for _, n := range names {
			id, ok := idOfBase(n)
			if _, rec := recorded[id]; !ok || rec || found[id].PID != 0 {
				continue
			}
			g := d.cgroups.Group(n)
			if pids, err := g.Procs(); err == nil && len(pids) > 0 {
				take(id, pids, "its cgroup "+g.Path())
			}
		}
		return found
	}
	if d.state.FIFO == nil {
		return found
	}
	names, err := d.state.FIFO.Names()
	if err != nil {
		return found
	}
	paths := map[string]bool{}
	ids := map[string]string{} // FIFO path -> instance id
	for _, n := range names {
		id, ok := idOfBase(fifoBase(n))
		if _, rec := recorded[id]; !ok || rec || found[id].PID != 0 {
			continue
		}
		p := d.state.FIFO.Join(n)
		paths[p], ids[p] = true, id
	}
	byID := map[string][]int{}
	for p, pids := range runs.Holders(paths) {
		byID[ids[p]] = append(byID[ids[p]], pids...)
	}
	for id, pids := range byID {
		take(id, dedup(pids), "its output FIFO in "+d.state.FIFO.Path())
	}
	return found
}

// removeStaleFIFOs removes, once the fleet is up, the output FIFOs in
// state_dir/fifo of instances that no longer exist and whose runs are
// neither recorded nor left alone: those of a daemon killed while it
// scaled down or removed a program, which no instance's end removed (an
// instance removes its own as it ends). Listed before the instances are,
// so a FIFO made meanwhile for a new instance is that instance's.
func (d *daemon) removeStaleFIFOs() {
	if d.state.FIFO == nil {
		return
	}
	names, err := d.state.FIFO.Names()
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, id := range d.mgr.IDs() {
		keep[id] = true
	}
	for _, r := range d.runs.Records() {
		keep[r.ID] = true
	}
	for _, id := range d.mgr.Offered() {
		keep[id] = true
	}
	for _, n := range names {
		if id, ok := idOfBase(fifoBase(n)); ok && keep[id] {
			continue
		}
		if st, err := d.state.FIFO.Lstat(n); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			continue // only FIFOs: whatever else is there is not tend's to remove
		}
		if err := d.state.FIFO.Remove(n); err != nil {
			d.note("%v", err)
		}
	}
}

// removeFIFOsOf removes the output FIFOs of instance id, whose run has
// ended outside any instance (a stray stopped).
func (d *daemon) removeFIFOsOf(id string) {
	name, k, ok := program.SplitID(id)
	if d.state.FIFO == nil || !ok {
		return
	}
	base := program.InstanceBase(name, k)
	for _, n := range []string{base + ".out", base + ".err", base + ".in", base} {
		if st, err := d.state.FIFO.Lstat(n); err == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
			_ = d.state.FIFO.Remove(n)
		}
	}
}

// fifoBase is the instance base ("NAME-K") of a FIFO's name: NAME-K.out,
// NAME-K.err, NAME-K.in (a protocol run's stdin, docs/protocol.md), or
// NAME-K (a daemon from before stdout and stderr had one each).
func fifoBase(name string) string {
	for _, ext := range []string{".out", ".err", ".in"} {
		if b, ok := strings.CutSuffix(name, ext); ok {
			return b
		}
	}
	return name
}

// idOfBase is the instance id "NAME:K" of an instance base "NAME-K" (a
// cgroup's or a FIFO's name), false if it names none.
func idOfBase(base string) (string, bool) {
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return "", false
	}
	id := base[:i] + ":" + base[i+1:]
	name, k, ok := program.SplitID(id)
	if !ok || !program.ValidName(name) || program.InstanceBase(name, k) != base {
		return "", false
	}
	return id, true
}

func dedup(pids []int) []int {
	seen := map[int]bool{}
	out := pids[:0]
	for _, p := range pids {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
