package logfile

import (
	"bytes"
	"io"
	"slices"
	"sync"
	"time"
)

// sharedLook is how long a follower trusts a quiet shared log's Version:
// its other writers' records change it only when this process hears of
// them (Log.Changed), so the files are looked at this often anyway.
const sharedLook = time.Second

// followBudget bounds the bytes one Next reads from one source, so a
// follower that fell far behind catches up in steps of bounded memory.
const followBudget = 1 << 20

// position is where a Cursor is in one source: a file and an offset just
// after a complete line in it. The file is known by its generation when
// this process writes the log (exact: it counts the rotations), else (and
// always for a shared log, which other processes rotate too) by its inode,
// which it keeps when rotated under another name.
type position struct {
	gen    uint64 // the log's rotations when the file was the current one
	ino    uint64 // 0: the source had no file yet
	off    int64
	ver    uint64    // the log's Version when this source was last read to its end
	looked time.Time // when that was (see sharedLook)
	last   time.Time // the time of the last record handed on, for lines without one
}

// Cursor follows sources from where Read left them: each Next returns what
// was written since, across rotations. It holds no descriptor between
// calls. Its methods belong to one goroutine.
type Cursor struct {
	srcs   []Source
	pos    []position
	stderr bool
	raw    bool
	// reading: the source readNew reads now is a protocol instance's
	// (Source.Protocol); the cursor's user reads it from one goroutine.
	reading bool

	once sync.Once
	ch   chan struct{} // woken by the writers of the sources, once C was called

	visit func(*Record) // Visit's: records go to it rather than into Entries
}

// C is ready whenever a source written by this process has new records
// (a Flush of its Log here, or its Changed). Records another process
// writes send nothing by themselves: its writer must tell this process,
// which calls Log.Changed, or the follower polls Next.
func (c *Cursor) C() <-chan struct{} {
	c.once.Do(func() {
		c.ch = make(chan struct{}, 1)
		for _, s := range c.srcs {
			if s.Log.writer.Load() || s.Log.shared {
				s.Log.Watch(c.ch)
			}
		}
	})
	return c.ch
}

// Close stops the notifications.
func (c *Cursor) Close() {
	if c.ch == nil {
		return
	}
	for _, s := range c.srcs {
		s.Log.Unwatch(c.ch)
	}
}

// Next returns the records written since the last call (or Read), merged
// in time order. more says a source has more than one call reads: call
// again without waiting.
func (c *Cursor) Next() (entries []Entry, more bool, err error) {
	for i, s := range c.srcs {
		p := &c.pos[i]
		ver := s.Log.Version()
		if s.Log.writer.Load() && ver == p.ver && (!s.Log.shared || time.Since(p.looked) < sharedLook) {
			continue // nothing written since its end was read
		}
		got, all := c.readNew(s, p)
		if all {
			p.ver, p.looked = ver, time.Now()
		} else {
			more = true
		}
		p.last = stamp(got, p.last)
		entries = append(entries, got...)
	}
	slices.SortStableFunc(entries, func(a, b Entry) int { return a.at.Compare(b.at) })
	return entries, more, nil
}

// readNew reads what source s gained after p, up to followBudget bytes,
// and moves p on. all says it read to the end.
func (c *Cursor) readNew(s Source, p *position) (out []Entry, all bool) {
	c.reading = s.Protocol
	set, from, off, gen, found := openFrom(s.Log, p)
	defer closeSet(set)
	// From the cursor's file to the current one, read as one stream: a
	// record may cross from a file into the next.
	st := newStream(set, from)
	if len(st.parts) == 0 {
		return nil, true
	}
	start := int64(0)
	switch {
	case st.parts[0].gen == from && found:
		start = off
	case st.parts[0].gen == from:
		// The cursor's file is gone: from the oldest kept, whose first
		// line may end a record rotated out.
		start = orphanEnd(st.parts[0].r, st.parts[0].size)
	}
	limit := max(lastLineEnd(st, st.size), start) // a record being written is not whole yet
	cut := limit-start > followBudget
	if cut {
		limit = start + followBudget
	}
	end := c.scanForward(s.ID, st, start, limit, &out)
	g, fileOff := st.locate(end)
	p.gen, p.ino, p.off = gen-uint64(g), set[g].ino, fileOff
	return out, !cut
}

// openFrom opens the files of l from the one p is in to the current one
// (newest first in set, p's at index from, where reading starts at off).
// If p's file is gone (rotated out while the follower was away) or there
// was none, found is false and from is the oldest file; if it is not what
// p says (truncated; its inode another file's), found is false too. gen
// is the log's generation, for the positions in set.
func openFrom(l *Log, p *position) (set []file, from int, off int64, gen uint64, found bool) {
	defer l.holdSet()() // first: a rotation takes the file's lock before rot
	l.rot.RLock()
	defer l.rot.RUnlock()
	gen = l.gen
	if l.writer.Load() && !l.shared {
		k := int(min(gen-p.gen, maxGens+1))
		for i := 0; i <= k; i++ {
			fl, ok := l.openGen(i)
			if !ok && i > 0 {
				break
			}
			set = append(set, fl)
		}
		if k < len(set) && set[k].f != nil && set[k].ino == p.ino {
			return set, k, min(p.off, set[k].size), gen, true
		}
		return set, len(set) - 1, 0, gen, false
	}
	for i := 0; i <= maxGens; i++ {
		fl, ok := l.openGen(i)
		if !ok && i > 0 {
			break
		}
		if ok && seen(set, fl.ino) {
			fl.f.Close() // rotated on while the set was opened
			continue
		}
		set = append(set, fl)
		if ok && fl.ino == p.ino && p.ino != 0 {
			if p.off > fl.size || !atLineStart(fl.f, p.off) {
				// Truncated, or the inode is another file's now (the
				// cursor's was dropped, its inode taken again): from
				// this file's start, as from the oldest after a drop.
				return set, len(set) - 1, 0, gen, false
			}
			return set, len(set) - 1, p.off, gen, true
		}
	}
	return set, len(set) - 1, 0, gen, false
}

// atLineStart says whether off begins a line of f.
func atLineStart(f io.ReaderAt, off int64) bool {
	if off == 0 {
		return true
	}
	var b [1]byte
	_, err := f.ReadAt(b[:], off-1)
	return err == nil && b[0] == '\n'
}

// scanForward appends the records of r in [off, limit) that the cursor
// wants to out, and returns where it stopped: after the last complete
// line (the rest is read next time, whole).
func (c *Cursor) scanForward(id string, r io.ReaderAt, off, limit int64, out *[]Entry) int64 {
	buf := make([]byte, min(limit-off, chunk))
	var carry []byte
	pos := off
	for pos < limit {
		n := min(int64(len(buf)), limit-pos)
		b := buf[:n]
		k, err := r.ReadAt(b, pos)
		if k == 0 && err != nil {
			break
		}
		b = b[:k]
		pos += int64(k)
		if carry != nil {
			b = append(carry, b...)
		}
		for {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break
			}
			c.add(id, b[:i], out)
			b = b[i+1:]
		}
		carry = append([]byte(nil), b...)
	}
	if len(carry) > 0 {
		// A line longer than a whole budget (only in a log from before
		// records) is handed on in pieces rather than never.
		if int64(len(carry)) < followBudget {
			return pos - int64(len(carry)) // the rest next time, whole
		}
		c.add(id, carry, out)
	}
	return pos
}

func (c *Cursor) add(id string, line []byte, out *[]Entry) {
	if c.visit != nil {
		c.visitLine(line)
		return
	}
	r := parseLine(line)
	if !wants(&r, c.stderr, c.raw, c.reading) {
		return
	}
	r.Line = bytes.Clone(r.Line)
	*out = append(*out, Entry{ID: id, Record: r})
}
