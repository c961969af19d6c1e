package proctree

import (
	"strconv"
	"time"
)

// orphanIndex knows tend's own children, where a subreaper's adopted orphans
// show up. Every run's leader is one of them too, so reading each child's
// stat on every sample would make a round over all runs quadratic: instead
// each child's session and group are read once, when it first appears, and
// the list itself is re-read at most every selfEvery.
//
// Caching is safe because a process can leave a session but never join
// another one than its own, and can join a group only inside its session:
// a cached sid or pgid can make a process a candidate it no longer is (the
// run's own stat read then turns it down, and the next listing reads it
// again), but never hide a member. The one miss is a pid reaped and reused
// by a new orphan between two listings.
type orphanIndex struct {
	at   time.Time     // last listing
	gen  uint64        // number of the last listing
	kids map[int]*kid  // tend's children by pid
	of   map[int][]int // pids of tend's children by the sid and pgid they had
	pids []int         // scratch
	buf  []byte        // scratch
	// dirty is set when a kid was dropped to have its stat read again.
	dirty bool
}

// kid is one of tend's children, as its stat read when first listed.
type kid struct {
	sid  int
	pgid int
	gen  uint64 // number of the last listing that had it
}

// refreshOrphansLocked re-lists tend's children when the index is stale.
func (t *Tracker) refreshOrphansLocked(now time.Time) {
	o := &t.orphans
	if !o.at.IsZero() && now.Sub(o.at) < t.selfEvery {
		return
	}
	o.at = now
	o.gen++
	if o.kids == nil {
		o.kids = make(map[int]*kid)
		o.of = make(map[int][]int)
		o.buf = make([]byte, 4096)
	}
	changed := false
	selfDir := t.dir(t.self)
	// Orphans go to the subreaper's first live thread, normally its main
	// one, but any of Go's threads may have forked a child: read them all.
	for _, tid := range listTasks(selfDir) {
		n, err := readOnce(selfDir+"/task/"+strconv.Itoa(tid)+"/children", &o.buf)
		if err != nil {
			continue
		}
		o.pids = parsePids(o.buf[:n], o.pids[:0])
		for _, pid := range o.pids {
			if k := o.kids[pid]; k != nil {
				k.gen = o.gen
				continue
			}
			if k := t.readKid(pid); k != nil {
				k.gen = o.gen
				o.kids[pid] = k
				changed = true
			}
		}
	}
	for pid, k := range o.kids {
		if k.gen != o.gen {
			delete(o.kids, pid)
			changed = true
		}
	}
	if changed || o.dirty {
		o.index()
		o.dirty = false
	}
}

// reread drops a candidate that turned out not to be a member (its session
// or group changed since it was indexed, or it is gone), so that the next
// listing reads its stat again instead of every sample trying it.
func (o *orphanIndex) reread(pid int) {
	delete(o.kids, pid)
	o.dirty = true
}

// index rebuilds the candidates by leader. A session leader is in no other
// session or group, so it is nobody's candidate (that leaves out every run's
// leader).
func (o *orphanIndex) index() {
	clear(o.of)
	for pid, k := range o.kids {
		if k.sid != pid {
			o.of[k.sid] = append(o.of[k.sid], pid)
		}
		if k.pgid != pid && k.pgid != k.sid {
			o.of[k.pgid] = append(o.of[k.pgid], pid)
		}
	}
}

// readKid reads the session and group of one of tend's children.
func (t *Tracker) readKid(pid int) *kid {
	n, err := readOnce(t.dir(pid)+"/stat", &t.statBuf)
	if err != nil {
		return nil
	}
	st, ok := parseStat(t.statBuf[:n])
	if !ok {
		return nil
	}
	return &kid{sid: st.sid, pgid: st.pgid}
}
