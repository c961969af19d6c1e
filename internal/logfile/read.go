package logfile

import (
	"bytes"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Source is one instance's log, as the API reads it.
type Source struct {
	ID  string // the instance, NAME:K
	Log *Log
	TTY bool // the instance runs in a terminal: its records are mostly stream tty
	// Protocol: the instance speaks a protocol on its stdio: its stdout
	// records are the transcript, its JSON-RPC lines stream Protocol.
	Protocol bool
}

// Entry is a record of one source, as Read and Cursor hand them on.
type Entry struct {
	ID string
	Record
	at time.Time // for ordering: TS, or for a line without one the time of the record before it
}

// Query selects the records Read returns.
type Query struct {
	Tail   int       // at most this many, the newest over every source together; < 0 = no bound
	Since  time.Time // only records at or after this time; zero = any
	Stderr bool      // only stderr records (also when following)
	// Raw: a protocol instance's JSON-RPC lines (stream Protocol) in
	// place of its transcript; without it they are left out.
	Raw bool

	protocol bool // the source read now is a protocol instance's
}

// match says whether q wants r, Tail aside.
func (q Query) match(r *Record) bool {
	if !wants(r, q.Stderr, q.Raw, q.protocol) {
		return false
	}
	return q.Since.IsZero() || (!r.TS.IsZero() && !r.TS.Before(q.Since))
}

// wants says whether a reader wants record r of a source: with stderr only
// stderr; a protocol instance's JSON-RPC lines only with raw, and then in
// place of its transcript (docs/protocol.md#the-transcript).
func wants(r *Record, stderr, raw, protocol bool) bool {
	switch {
	case stderr:
		return r.Stream == Stderr
	case r.Stream == Protocol:
		return raw
	case raw && protocol && r.Stream == Stdout:
		return false
	}
	return true
}

// parseLine is Parse for a reader: a line not in record form is shown as
// it is, as stdout without a time (a log from before records).
func parseLine(line []byte) Record {
	r, err := Parse(line)
	if err != nil {
		return Record{Stream: Stdout, Line: line}
	}
	return r
}

// chunk is how much a reader reads at a time.
const chunk = 64 << 10

// file is one open file of a log's set.
type file struct {
	f    *os.File
	ino  uint64
	size int64 // when it was opened
}

// openSet opens the log's files, newest first: index 0 is the current
// file (f nil if there is none yet), then the rotated ones until the first
// missing, at most upto of them. It holds rot, so the set is one
// consistent generation, which it returns (see Log.gen).
func (l *Log) openSet(upto int) ([]file, uint64) {
	defer l.holdSet()() // first: a rotation takes the file's lock before rot
	l.rot.RLock()
	defer l.rot.RUnlock()
	var set []file
	for i := 0; i <= upto; i++ {
		fl, ok := l.openGen(i)
		if !ok && i > 0 {
			break
		}
		if ok && seen(set, fl.ino) {
			fl.f.Close() // rotated on while the set was opened
			continue
		}
		set = append(set, fl)
	}
	return set, l.gen
}

// seen says whether set has the file with inode ino already. Without this
// process's rot (another process rotates a shared log, or writes a log
// this one only reads), a reader opening the set one name after the other
// may meet a file twice: under its old name and, shifted on meanwhile,
// under the next; or both at once between a shared rotation's link and
// its rename (see rotateShared).
func seen(set []file, ino uint64) bool {
	for _, fl := range set {
		if fl.f != nil && fl.ino == ino {
			return true
		}
	}
	return false
}

// maxGens bounds how many rotated files a reader looks for.
const maxGens = 1000

// openGen opens generation i of the set; the caller holds rot.
func (l *Log) openGen(i int) (file, bool) {
	f, err := l.dir.OpenFile(l.name(i), os.O_RDONLY, 0)
	if err != nil {
		return file{}, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return file{}, false
	}
	return file{f: f, ino: st.Ino, size: st.Size}, true
}

func closeSet(set []file) {
	for _, fl := range set {
		if fl.f != nil {
			fl.f.Close()
		}
	}
}

// stamp sets each entry's ordering time, carrying the last one over lines
// without a time of their own; it returns the last.
func stamp(es []Entry, last time.Time) time.Time {
	for i := range es {
		if !es[i].TS.IsZero() {
			last = es[i].TS
		}
		es[i].at = last
	}
	return last
}

// lastLineEnd is the offset just after the last newline in the first size
// bytes of f (0 if none).
func lastLineEnd(f io.ReaderAt, size int64) int64 {
	buf := make([]byte, min(size, 4096))
	for end := size; end > 0; {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil && err != io.EOF {
			return 0
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1
		}
		end -= n
	}
	return 0
}

// scanBack calls fn with each line of the first size bytes of r, the last
// first, until fn returns false. A last line without a newline counts.
func scanBack(r io.ReaderAt, size int64, fn func(line []byte) bool) {
	buf := make([]byte, 0, chunk)
	var carry []byte // the start of the line split at the chunk's start: its end was in the chunk after
	pos := size
	if pos > 0 {
		var last [1]byte
		if _, err := r.ReadAt(last[:], pos-1); err == nil && last[0] == '\n' {
			pos-- // the final newline ends the last line, it does not begin an empty one
		}
	}
	end := pos
	for pos > 0 {
		n := min(int64(chunk), pos)
		pos -= n
		b := buf[:n]
		if _, err := r.ReadAt(b, pos); err != nil && err != io.EOF {
			return
		}
		if carry != nil {
			b = append(b, carry...) // a line longer than a chunk
		}
		for {
			i := bytes.LastIndexByte(b, '\n')
			if i < 0 {
				break
			}
			if !fn(b[i+1:]) {
				return
			}
			b = b[:i]
		}
		carry = append(carry[:0:0], b...)
	}
	if end > 0 {
		fn(carry)
	}
}
