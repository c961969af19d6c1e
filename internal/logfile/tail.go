package logfile

import (
	"container/heap"
	"io"
	"math"
	"slices"
	"time"
)

// Read calls fn with the newest records of srcs that q selects, oldest
// first, merged in time order (equal times keep the order of srcs, and a
// source keeps its own order), and returns a Cursor just after them in
// every source, for following; the caller closes it. fn's Entry, its Line
// included, is valid only during the call; an error from fn ends Read
// with that error (and no Cursor).
//
// What a tail costs is the kept lines' bytes and some 24 bytes a line,
// whatever the size of the files it looks through; it holds a source's
// files open only while it reads them.
func Read(srcs []Source, q Query, fn func(*Entry) error) (*Cursor, error) {
	c := &Cursor{srcs: srcs, pos: make([]position, len(srcs)), stderr: q.Stderr, raw: q.Raw}
	tails := make([]kept, 0, len(srcs))
	total := 0
	var floor int64 = math.MinInt64 // older than the oldest kept: no use reading on
	for i, src := range srcs {
		c.pos[i].ver, c.pos[i].looked = src.Log.Version(), time.Now() // before reading: a write meanwhile is read again
		upto := maxGens
		if q.Tail == 0 {
			upto = 1 // only the end is needed, which may be in the file before the current one
		}
		set, gen := src.Log.openSet(upto)
		st := newStream(set, len(set)-1)
		end := lastLineEnd(st, st.size) // a record being written is not whole yet
		c.pos[i].gen = gen
		if len(st.parts) > 0 {
			g, off := st.locate(end)
			c.pos[i].gen, c.pos[i].ino, c.pos[i].off = gen-uint64(g), set[g].ino, off
		}
		if q.Tail != 0 {
			start := int64(0)
			if len(st.parts) > 0 {
				start = min(orphanEnd(st.parts[0].r, st.parts[0].size), end)
			}
			q.protocol = src.Protocol
			k := tail(st, start, end, q, floor)
			k.src = i
			total += len(k.at)
			tails = append(tails, k)
			if q.Tail > 0 && total > 2*q.Tail {
				floor, total = trim(tails, q.Tail)
			}
		}
		closeSet(set)
	}
	skip := 0
	if q.Tail > 0 && total > q.Tail {
		skip = total - q.Tail
	}
	if err := merge(srcs, tails, skip, fn); err != nil {
		return nil, err
	}
	return c, nil
}

// kept is one source's part of a tail: its selected lines, newest first.
type kept struct {
	src   int     // index in the sources
	arena []byte  // the lines as stored, each ending in a newline
	ends  []int32 // the end of each line in arena (a tail is capped far below 2 GiB)
	at    []int64 // each line's ordering time, unix ms
}

func (k *kept) line(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.arena[start : k.ends[i]-1]
}

// tail collects the newest records of one source's files, read as one
// stream between start and end, that q selects (at most q.Tail, none
// older than floor).
func tail(st *stream, start, end int64, q Query, floor int64) kept {
	var k kept
	newer := int64(0) // the time of the record after, for a line without one
	scanBack(io.NewSectionReader(st, start, end-start), end-start, func(line []byte) bool {
		r := parseLine(line)
		at := newer
		if !r.TS.IsZero() {
			at = r.TS.UnixMilli()
			if !q.Since.IsZero() && r.TS.Before(q.Since) || at < floor {
				return false // every record before it is older still
			}
			newer = at
		}
		if !q.match(&r) {
			return true
		}
		k.arena = append(double(k.arena, len(line)+1), line...)
		k.arena = append(k.arena, '\n')
		k.ends = append(double(k.ends, 1), int32(len(k.arena)))
		k.at = append(double(k.at, 1), at)
		return q.Tail <= 0 || len(k.at) < q.Tail
	})
	return k
}

// double makes room for n more in s, doubling its capacity when it grows:
// append's gentler growth for big slices would allocate five times the
// final size over a long tail.
func double[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	d := make([]T, len(s), max(2*cap(s), len(s)+n, 256))
	copy(d, s)
	return d
}

// trim drops from tails the lines older than the n newest of them all, and
// returns that floor and how many lines are left (ties at the floor stay:
// the merge's skip settles them).
func trim(tails []kept, n int) (floor int64, total int) {
	var ats []int64
	for _, k := range tails {
		ats = append(ats, k.at...)
	}
	slices.Sort(ats)
	floor = ats[len(ats)-n]
	for i := range tails {
		k := &tails[i]
		j := len(k.at)
		for j > 0 && k.at[j-1] < floor {
			j--
		}
		k.at, k.ends = k.at[:j], k.ends[:j]
		if j == 0 {
			k.arena = k.arena[:0]
		} else {
			k.arena = k.arena[:k.ends[j-1]]
		}
		total += j
	}
	return floor, total
}

// merge calls fn with the lines of tails, oldest first in time order (a
// source's own order kept; equal times in the order of the sources),
// after skipping the first skip.
func merge(srcs []Source, tails []kept, skip int, fn func(*Entry) error) error {
	h := make(heads, 0, len(tails))
	for i := range tails {
		if n := len(tails[i].at); n > 0 {
			h = append(h, head{k: &tails[i], i: n - 1})
		}
	}
	heap.Init(&h)
	last := make([]time.Time, len(srcs)) // each source's last time, for lines without one
	var e Entry
	for h.Len() > 0 {
		top := &h[0]
		k, i := top.k, top.i
		if skip > 0 {
			skip--
		} else {
			r := parseLine(k.line(i))
			if !r.TS.IsZero() {
				last[k.src] = r.TS
			}
			e = Entry{ID: srcs[k.src].ID, Record: r, at: last[k.src]}
			if err := fn(&e); err != nil {
				return err
			}
		}
		if top.i--; top.i < 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return nil
}

// head is the oldest line not yet merged of one source.
type head struct {
	k *kept
	i int // index in k, which runs newest first
}

// heads is a min-heap of sources by the time of their next line, then by
// their order.
type heads []head

func (h heads) Len() int { return len(h) }
func (h heads) Less(a, b int) bool {
	ta, tb := h[a].k.at[h[a].i], h[b].k.at[h[b].i]
	return ta < tb || ta == tb && h[a].k.src < h[b].k.src
}
func (h heads) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *heads) Push(x any)   { *h = append(*h, x.(head)) }
func (h *heads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
