package logfile

import "bytes"

// DefaultLineMax bounds how much of a line without a newline is held back
// waiting for the rest: past it the piece is stored as a partial record.
const DefaultLineMax = 16 << 10

// Lines cuts one stream's bytes into lines. A line longer than Max bytes
// is cut into pieces of Max bytes, each but the last marked partial; the
// unfinished line at the end of a stream is flushed, partial, by End.
// The zero value holds lines of any length; set Max first.
type Lines struct {
	Max  int    // the longest line handed on in one piece; 0 = no bound
	part []byte // the start of a line whose newline has not come yet, at most Max bytes
}

// Feed hands each complete line (and each piece of a long one) of data to
// emit. emit's line is valid only during the call.
func (l *Lines) Feed(data []byte, emit func(line []byte, partial bool)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			l.add(data, emit)
			return
		}
		if len(l.part) == 0 && (l.Max <= 0 || i <= l.Max) {
			emit(data[:i], false) // the common case: no copy
		} else {
			l.add(data[:i], emit)
			emit(l.part, false)
			l.part = l.part[:0]
		}
		data = data[i+1:]
	}
}

// add appends seg to the pending line, handing on pieces of Max bytes as
// partial when more follows.
func (l *Lines) add(seg []byte, emit func([]byte, bool)) {
	for l.Max > 0 && len(l.part)+len(seg) > l.Max {
		if len(l.part) == 0 {
			emit(seg[:l.Max], true)
			seg = seg[l.Max:]
			continue
		}
		n := l.Max - len(l.part)
		l.part = append(l.part, seg[:n]...)
		seg = seg[n:]
		emit(l.part, true)
		l.part = l.part[:0]
	}
	l.part = append(l.part, seg...)
}

// Pending is how many bytes of an unfinished line are held.
func (l *Lines) Pending() int { return len(l.part) }

// End flushes the unfinished line, if any, as a partial one: its stream
// ended without a newline.
func (l *Lines) End(emit func(line []byte, partial bool)) {
	if len(l.part) > 0 {
		emit(l.part, true)
	}
	l.part = nil
}

// Part is a copy of the unfinished line held (nil if none), for handing
// it to the next daemon with the stream it comes from (tend upgrade).
func (l *Lines) Part() []byte {
	if len(l.part) == 0 {
		return nil
	}
	return append([]byte(nil), l.part...)
}

// SetPart starts with part as the unfinished line: what an earlier daemon
// held of the stream (Part), which the next bytes finish.
func (l *Lines) SetPart(part []byte) { l.part = append(l.part[:0], part...) }
