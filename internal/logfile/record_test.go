package logfile

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	ts := time.Date(2026, 12, 3, 1, 54, 46, 123_000_000, time.UTC)
	for _, tc := range []struct {
		r    Record
		want string
	}{
		{Record{TS: ts, Stream: Stdout, Line: []byte("listening on :8080")}, "2026-12-03T01:54:46.123Z out | listening on :8080\n"},
		{Record{TS: ts, Stream: Stderr, Line: []byte("")}, "2026-12-03T01:54:46.123Z err | \n"},
		{Record{TS: ts, Stream: Tend, Line: []byte("a note")}, "2026-12-03T01:54:46.123Z tend | a note\n"},
		{Record{TS: ts, Stream: Stdout, Partial: true, Line: []byte("50% ")}, "2026-12-03T01:54:46.123Z out + 50% \n"},
		{Record{TS: ts, Stream: TTY, Line: []byte("\x1b[1mbold\x1b[0m\r")}, "2026-12-03T01:54:46.123Z tty | \x1b[1mbold\x1b[0m\r\n"},
		{Record{TS: ts, Stream: TTY, Partial: true, Line: []byte("$ ")}, "2026-12-03T01:54:46.123Z tty + $ \n"},
		{Record{TS: ts, Stream: Stdout, Line: []byte(" | looks | like a record \xff\r")}, "2026-12-03T01:54:46.123Z out |  | looks | like a record \xff\r\n"},
	} {
		got := string(Append(nil, tc.r))
		if got != tc.want {
			t.Errorf("Append = %q, want %q", got, tc.want)
		}
		if n := storedLen(tc.r); n != len(got) {
			t.Errorf("storedLen = %d, want %d", n, len(got))
		}
		if len(got) > MaxHeader+len(tc.r.Line) {
			t.Errorf("%q is longer than MaxHeader allows", got)
		}
		back, err := Parse([]byte(strings.TrimSuffix(got, "\n")))
		if err != nil || !back.TS.Equal(tc.r.TS) || back.Stream != tc.r.Stream || back.Partial != tc.r.Partial || !bytes.Equal(back.Line, tc.r.Line) {
			t.Errorf("Parse(%q) = %+v, %v", got, back, err)
		}
	}
}

func TestParseRefusesWhatWasNeverWritten(t *testing.T) {
	for _, line := range []string{
		"",
		"plain old output",
		"2026-12-03T01:54:46.123Z out|x",
		"2026-12-03T01:54:46.123Z out ! x",
		"2026-12-03T01:54:46.123Z std | x",
		"2026-12-03T01:54:46.123+01:00 out | x",
		"2026-02-30T01:54:46.123Z out | x", // no such day
		"2026-12-03T25:54:46.123Z out | x",
		"2026-12-03 01:54:46.123Z out | x",
		"2026-12-03T01:54:46.12aZ out | x",
		"2026-12-03T01:54:46.123Z out |",
	} {
		if r, err := Parse([]byte(line)); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", line, r)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts is exactly what
// Append writes for the record it returns.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"2026-12-03T01:54:46.123Z out | hello",
		"2026-12-03T01:54:46.123Z err + partial",
		"2026-12-03T01:54:46.123Z tend | note",
		"0000-01-01T00:00:00.000Z out | ",
		"9999-12-31T23:59:59.999Z err | \xff\xfe",
		"2026-02-29T00:00:00.000Z out | not a leap year",
		"plain line",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Parse(line)
		if err != nil {
			return
		}
		if bytes.IndexByte(line, '\n') >= 0 {
			if bytes.IndexByte(r.Line, '\n') < 0 {
				t.Fatalf("a newline outside the line was accepted: %q", line)
			}
			return // a line never holds one; the reader splits on them first
		}
		if got := Append(nil, r); !bytes.Equal(got, append(bytes.Clone(line), '\n')) {
			t.Fatalf("Parse(%q) = %+v, which Append writes as %q", line, r, got)
		}
	})
}
