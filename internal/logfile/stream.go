package logfile

import (
	"bytes"
	"io"
)

// A stream is files of a log's set read as one, oldest first. The writer
// fills each file to exactly max_size, so a record may begin at the end
// of one file and end at the start of the next: read as one stream, it is
// whole again.
type stream struct {
	parts []part // oldest first
	size  int64
}

// part is one file in a stream.
type part struct {
	r     io.ReaderAt
	gen   int   // its index in the set it came from (0 = the current file)
	start int64 // where it begins in the stream
	size  int64
}

// newStream reads set[from] (the oldest of them) to set[0] as one; a
// missing file (f nil) is empty.
func newStream(set []file, from int) *stream {
	s := &stream{}
	for g := from; g >= 0; g-- {
		fl := set[g]
		if fl.f == nil {
			continue
		}
		s.parts = append(s.parts, part{r: fl.f, gen: g, start: s.size, size: fl.size})
		s.size += fl.size
	}
	return s
}

// ReadAt reads the stream, across its files.
func (s *stream) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for _, p := range s.parts {
		if len(b) == 0 {
			break
		}
		if off >= p.start+p.size {
			continue
		}
		want := min(int64(len(b)), p.start+p.size-off)
		k, err := p.r.ReadAt(b[:want], off-p.start)
		n += k
		if int64(k) < want {
			if err == nil {
				err = io.ErrUnexpectedEOF // the file shrank since it was opened
			}
			return n, err
		}
		b, off = b[want:], off+want
	}
	if len(b) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// locate is the file a stream offset just after a newline belongs to: the
// file that newline is in (so the offset is the end of a line of that
// file), and the offset in it. An offset at the stream's start is the
// oldest file's start.
func (s *stream) locate(off int64) (gen int, fileOff int64) {
	for _, p := range s.parts {
		if off <= p.start+p.size && (off > p.start || off == 0) {
			return p.gen, off - p.start
		}
	}
	if len(s.parts) == 0 {
		return 0, 0
	}
	p := s.parts[len(s.parts)-1]
	return p.gen, off - p.start
}

// orphanEnd is where the records of the oldest file of a set begin: just
// after its first line when that line is the end of a record whose
// beginning was in a file rotated out since (it is not a record, and what
// follows it begins like one); else 0. A log from before records, whose
// lines are not records either, keeps its first line.
func orphanEnd(f io.ReaderAt, size int64) int64 {
	// Nearly always a record begins the file: its header says so, and
	// that is all a tail of many logs reads here.
	var head [MaxHeader]byte
	n, _ := f.ReadAt(head[:min(size, int64(MaxHeader))], 0)
	first := head[:n]
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if _, err := Parse(first); err == nil {
		return 0
	}
	buf := make([]byte, min(size, int64(DefaultLineMax+2*MaxHeader)))
	n, _ = f.ReadAt(buf, 0)
	buf = buf[:n]
	i := bytes.IndexByte(buf, '\n')
	if i < 0 || !beginsRecord(buf[i+1:]) {
		return 0
	}
	return int64(i) + 1
}

// beginsRecord reports whether b begins like a stored record: the shape
// of its time, as far as b goes (at least one byte).
func beginsRecord(b []byte) bool {
	const shape = "dddd-dd-ddTdd:dd:dd.dddZ "
	if len(b) == 0 {
		return false
	}
	for i := 0; i < len(b) && i < len(shape); i++ {
		if shape[i] == 'd' && (b[i] < '0' || b[i] > '9') || shape[i] != 'd' && b[i] != shape[i] {
			return false
		}
	}
	return true
}
