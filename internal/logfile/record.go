// Package logfile stores an instance's captured output as records a person
// reads with less and a program parses: one line each, with its time and
// stream,
//
//	2026-12-03T01:54:46.123Z out | listening on :8080
//	2026-12-03T01:54:46.124Z err | warning: no cache dir
//	2026-12-03T01:54:47.000Z tend | cannot read the adopted run's output: …
//	2026-12-03T01:54:48.000Z tty + \x1b[1m$ \x1b[0m
//
// in a set of files that rotates at exactly max_size bytes and keeps
// max_files rotated ones: NAME-K.log, then NAME-K.log.1 (the newest
// rotated) to NAME-K.log.N (the oldest). Each rotated file is exactly
// max_size bytes: a record that does not fit ends one file and goes on at
// the start of the next, and readers read the set as one stream, so it is
// whole again (the end of one whose beginning was rotated out is not
// shown). A record
// whose line did not end with a newline (cut at the size bound, or the run
// ended mid-line) has '+' in place of '|'.
//
// Every file is opened through a statedir.Dir, so a symlink planted where a
// log goes is never written through.
//
// One goroutine writes a Log (the capture's writer: see package spawn);
// any number read it at the same time: Read returns the last records of
// several logs merged in time order, and a Cursor follows them on from
// there, across rotations.
package logfile

import (
	"errors"
	"time"
)

// Stream is where a record's line came from.
type Stream uint8

// The streams. Tend is a note of tend's own about the instance; TTY is
// what a run with a terminal wrote to it, stored as the bytes it wrote: a
// record is the bytes up to a newline, or, partial, the bytes of one read
// that no newline ended, so the records give the stream back byte for byte
// (each line, and a newline after each that is not partial).
const (
	Stdout Stream = iota
	Stderr
	Tend
	TTY
	// Protocol is a JSON-RPC line of a protocol run's, as it went over
	// the wire (docs/protocol.md#the-transcript): shown by --raw only.
	Protocol
)

// String is the stream's name in the API's JSON: stdout, stderr, tend or
// tty.
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case TTY:
		return "tty"
	case Protocol:
		return "acp"
	}
	return "tend"
}

// token is the stream's word in the file.
func (s Stream) token() string {
	switch s {
	case Stdout:
		return "out"
	case Stderr:
		return "err"
	case TTY:
		return "tty"
	case Protocol:
		return "acp"
	}
	return "tend"
}

// Record is one stored line.
type Record struct {
	TS      time.Time // to the millisecond, UTC; zero for a line not in record form (a log from before records)
	Stream  Stream
	Partial bool   // the line did not end with a newline here: cut at the size bound, or its run ended
	Line    []byte // without the newline; never contains one
}

// tsLen is the length of a record's time: 2006-01-02T15:04:05.000Z.
const tsLen = 24

// MaxHeader is the most bytes a record adds to its line, the newline
// included: the time, the longest stream word and the separators.
const MaxHeader = tsLen + len(" tend | ") + 1

// Append appends r in its stored form, newline included, to b. r.Line must
// not contain a newline.
func Append(b []byte, r Record) []byte {
	b = appendTS(b, r.TS)
	b = append(b, ' ')
	b = append(b, r.Stream.token()...)
	if r.Partial {
		b = append(b, " + "...)
	} else {
		b = append(b, " | "...)
	}
	b = append(b, r.Line...)
	return append(b, '\n')
}

// storedLen is len(Append(nil, r)).
func storedLen(r Record) int { return tsLen + 1 + len(r.Stream.token()) + 3 + len(r.Line) + 1 }

// msTime is unix milliseconds as a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// AppendTS appends t as a record stores it (RFC 3339, UTC, milliseconds).
func AppendTS(b []byte, t time.Time) []byte { return appendTS(b, t) }

func appendTS(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	ms := t.Nanosecond() / 1e6
	if y < 0 || y > 9999 {
		y = 0 // not representable in four digits; never a real capture time
	}
	b = append4(b, y)
	b = append(b, '-')
	b = append2(b, int(mo))
	b = append(b, '-')
	b = append2(b, d)
	b = append(b, 'T')
	b = append2(b, h)
	b = append(b, ':')
	b = append2(b, mi)
	b = append(b, ':')
	b = append2(b, s)
	b = append(b, '.')
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, 'Z')
}

func append2(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
func append4(b []byte, n int) []byte { return append2(append2(b, n/100), n%100) }

// errNotRecord is Parse's refusal of a line that is not in record form.
var errNotRecord = errors.New("not a record")

// Parse reads one stored line (without its newline). The Line of the
// result aliases line. A line not in record form is an error; readers show
// it as it is (see Read), so a log written before records existed still
// reads.
func Parse(line []byte) (Record, error) {
	var r Record
	if len(line) < tsLen+len(" out | ") {
		return r, errNotRecord
	}
	ts, ok := parseTS(line[:tsLen])
	if !ok || line[tsLen] != ' ' {
		return r, errNotRecord
	}
	r, ok = parseStream(line[tsLen+1:])
	if !ok {
		return Record{}, errNotRecord
	}
	r.TS = ts
	return r, nil
}

// parseStream reads what follows a record's time: its stream, whether it
// is partial, and its line (tty first: a terminal's follower reads the
// most records).
func parseStream(rest []byte) (Record, bool) {
	var r Record
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "tty ":
		r.Stream, rest = TTY, rest[4:]
	case len(rest) >= 4 && string(rest[:4]) == "out ":
		r.Stream, rest = Stdout, rest[4:]
	case len(rest) >= 4 && string(rest[:4]) == "err ":
		r.Stream, rest = Stderr, rest[4:]
	case len(rest) >= 5 && string(rest[:5]) == "tend ":
		r.Stream, rest = Tend, rest[5:]
	case len(rest) >= 4 && string(rest[:4]) == "acp ":
		r.Stream, rest = Protocol, rest[4:]
	default:
		return r, false
	}
	if len(rest) < 2 || rest[1] != ' ' || (rest[0] != '|' && rest[0] != '+') {
		return r, false
	}
	r.Partial, r.Line = rest[0] == '+', rest[2:]
	return r, true
}

// parseTS reads exactly the form appendTS writes; anything else is false.
// By hand rather than time.Parse: a tail of a big log parses a great many.
func parseTS(b []byte) (time.Time, bool) {
	// 2006-01-02T15:04:05.000Z
	// 0123456789012345678901234
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[23] != 'Z' {
		return time.Time{}, false
	}
	var f [7]int
	for i, span := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 23}} {
		for _, c := range b[span[0]:span[1]] {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
			f[i] = f[i]*10 + int(c-'0')
		}
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6]*1e6, time.UTC)
	// time.Date normalises 02-30 to 03-02: such a time was never written.
	if t.Year() != f[0] || int(t.Month()) != f[1] || t.Day() != f[2] || t.Hour() != f[3] || t.Minute() != f[4] || t.Second() != f[5] {
		return time.Time{}, false
	}
	return t, true
}
