package reaper

import "time"

// An upgrade in place (tend upgrade) re-executes the daemon in the same
// process: its runs stay its children, and an exit that happens while the
// old program hands over, or during the exec, is a zombie that waits for
// the new program. The old program pauses the reaper (nothing collected
// is then lost in its memory); the new one registers every run it was
// handed (Expect) before its reaper's first drain, so such an exit is
// held for the run's owner (Claim) instead of being counted as an
// orphan's and lost.

// Pause stops collecting exits: the drain returns at once, and an adopted
// run's exit noticed through its pidfd waits, until Resume. When Pause
// returns no drain is under way. Spawn and Signal go on working.
func (r *Reaper) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.paused, r.unpause = true, make(chan struct{})
	}
}

// Resume undoes Pause (the upgrade did not happen) and drains at once.
func (r *Reaper) Resume() {
	r.mu.Lock()
	if r.paused {
		r.paused = false
		close(r.unpause)
	}
	r.mu.Unlock()
	r.drain(time.Now())
}

// Expect registers pids, children this process already has (the runs an
// upgrade handed over), before Start: the drain keeps the exit of each
// until Claim names its owner. killGroup is as for Spawn.
func (r *Reaper) Expect(pids []int, killGroup bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pid := range pids {
		r.routes[pid] = route{killGroup: killGroup}
	}
}

// Claim gives an expected pid its owner. If it has exited meanwhile, owner
// gets its status now (on the caller's goroutine; it must not block).
// False if pid was not expected (or was claimed already).
func (r *Reaper) Claim(pid int, owner Owner) bool {
	r.mu.Lock()
	if st, ok := r.held[pid]; ok {
		delete(r.held, pid)
		r.mu.Unlock()
		owner(st)
		return true
	}
	defer r.mu.Unlock()
	rt, ok := r.routes[pid]
	if !ok || rt.owner != nil || rt.pidfd != nil {
		return false
	}
	rt.owner = owner
	r.routes[pid] = rt
	return true
}

// Unexpect forgets the expected pids nobody claimed: their exits count as
// orphans' from now on (and those held already are counted now).
func (r *Reaper) Unexpect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, rt := range r.routes {
		if rt.owner == nil && rt.pidfd == nil {
			delete(r.routes, pid)
		}
	}
	r.orphan.Add(uint64(len(r.held)))
	clear(r.held)
}
