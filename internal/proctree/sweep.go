package proctree

import (
	"bytes"
	"strconv"
	"syscall"
)

// Without cgroups, a run's process group is not all of it: a member that
// called setsid() (a daemonizing tool, a browser's zygote) has left it.
// Signal reaches those too, by the tree (docs/containment.md#without-cgroups).

// Signal sends sig to every member of the run led by leader outside the
// leader's process group (the caller signals the group itself, through the
// reaper), and returns how many it signalled and the pids of the members
// still there besides the leader (signalled or in its group: what a stop
// waits for). While the leader lives the run's tree is walked afresh; once
// it is gone its members are the ones the last sample found, each still the
// process it found (its stat, held open, or read again, has the same start
// time), so a reused pid is never hit.
func (t *Tracker) Signal(leader int, sig syscall.Signal) (n int, left []int) {
	if leader <= 0 || leader == t.self {
		return 0, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[leader]
	if r == nil {
		r = &run{leader: leader, members: make(map[int]*member)}
		t.runs[leader] = r
	}
	alive := t.walkLocked(r, t.now())
	if alive {
		t.resultLocked(r, t.now())
	}
	for _, m := range r.members {
		if m.pid == leader {
			continue
		}
		if !alive && !t.readLocked(m) {
			continue // gone, or its pid now names another process
		}
		if m.state != "Z" {
			left = append(left, m.pid)
		}
		if m.pgid == leader {
			continue
		}
		if syscall.Kill(m.pid, sig) == nil {
			n++
		}
	}
	if alive {
		t.coolLocked(r) // the run is being stopped: nothing to keep open for
	} else {
		t.forgetLocked(r)
	}
	return n, left
}

// OwnedBy reports whether pid's environment says it was started by the
// instance id (TEND_ID=id, which every run passes on unless a process
// scrubs its environment): how an orphan that left its run's session and
// was never sampled is still found at the run's end.
func OwnedBy(procRoot string, pid int, id string) bool {
	buf := make([]byte, 4096)
	n, err := readOnce(procRoot+"/"+strconv.Itoa(pid)+"/environ", &buf)
	if err != nil {
		return false
	}
	want := []byte("TEND_ID=" + id)
	for v := range bytes.SplitSeq(buf[:n], []byte{0}) {
		if bytes.Equal(v, want) {
			return true
		}
	}
	return false
}
