package logfile

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// big is a record of about 1.5 KiB, so that every third one or so crosses
// the end of a 4 KiB file.
func big(i int) string { return "seq " + strings.Repeat("x", 1500) + " " + string(rune('a'+i%26)) }

// splitLog writes records to a 4 KiB log until one crosses from the
// current file into the next, and returns how many it wrote.
func splitLog(t *testing.T, l *Log, stream Stream, from int) int {
	t.Helper()
	for i := from; ; i++ {
		if err := l.Add(Record{TS: t0.Add(time.Duration(i) * time.Millisecond), Stream: stream, Line: []byte(big(i))}); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if b, err := l.dir.ReadFile(l.name(1)); err == nil && len(b) == 4096 && b[len(b)-1] != '\n' {
			return i + 1
		}
		if i > from+20 {
			t.Fatal("no record crossed into the next file")
		}
	}
}

// A record split across two files reads back whole: in a merged tail of
// several logs (tend logs NAME), and for followers, this process's log
// and one written elsewhere (polled, found by inode).
func TestASplitRecordReadsWhole(t *testing.T) {
	d := testutil.StateDir(t)
	a := New(d, "a-0", Options{MaxSize: 4096, MaxFiles: 3, Writer: true})
	b := New(d, "b-0", Options{MaxSize: 4096, MaxFiles: 3, Writer: true})
	other := New(d, "a-0", Options{}) // a reader of a's files without a's writer
	srcs := []Source{{ID: "a:0", Log: a}, {ID: "b:0", Log: b}}
	_, fa := read(t, srcs, Query{})
	defer fa.Close()
	_, fo := read(t, []Source{{ID: "a:0", Log: other}}, Query{})
	defer fo.Close()

	n := splitLog(t, a, Stdout, 0)
	add(t, b, 1000, Stderr, "b's line")
	want := func(es []Entry, who string, wantB bool) {
		t.Helper()
		var as int
		for _, e := range es {
			switch {
			case e.ID == "b:0":
				if !wantB || string(e.Line) != "b's line" {
					t.Errorf("%s: b's record %q", who, e.Line)
				}
				wantB = false
			case string(e.Line) != big(as) || e.Partial || e.Stream != Stdout || !e.TS.Equal(t0.Add(time.Duration(as)*time.Millisecond)):
				t.Fatalf("%s: record %d is %q (partial %v, %v), want %q", who, as, e.Line, e.Partial, e.TS, big(as))
			default:
				as++
			}
		}
		if as != n || wantB {
			t.Errorf("%s: %d of a's %d records (b's missing: %v)", who, as, n, wantB)
		}
	}
	got, cur := read(t, srcs, Query{Tail: -1})
	cur.Close()
	want(got, "tail", true)
	want(nextAll(t, fa), "follower", true)
	want(nextAll(t, fo), "follower of another process's log", false)
}

// While only a split record's beginning is on disk (its end is still in
// the writer's buffer) it is not handed on; once flushed, it is, whole,
// to the cursor that was placed before it (by a tail, or by a follow
// from now).
func TestASplitRecordHalfWrittenWaits(t *testing.T) {
	for _, q := range []Query{{Tail: -1}, {Tail: 0}} {
		d := testutil.StateDir(t)
		l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 2, Writer: true})
		n := 0
		for i := 0; ; i++ {
			l.Add(Record{TS: t0.Add(time.Duration(i) * time.Millisecond), Line: []byte(big(i))}) // no Flush: the end stays buffered
			if b, err := l.dir.ReadFile(l.name(1)); err == nil && b[len(b)-1] != '\n' {
				n = i + 1
				break
			}
			if i > 20 {
				t.Fatal("no record crossed into the next file")
			}
		}
		if fi, err := os.Stat(d.Join(l.name(0))); err == nil && fi.Size() != 0 {
			t.Fatalf("the current file has %d bytes before the flush", fi.Size())
		}
		got, cur := read(t, []Source{{ID: "w:0", Log: l}}, q)
		defer cur.Close()
		for i, e := range got {
			if string(e.Line) != big(i) {
				t.Fatalf("tail %d: record %d is %.40q", q.Tail, i, e.Line)
			}
		}
		if q.Tail < 0 && len(got) != n-1 {
			t.Errorf("tail: %d records, want the %d whole ones", len(got), n-1)
		}
		if got, _, _ := cur.Next(); len(got) != 0 {
			t.Fatalf("tail %d: Next before the flush gave %d records", q.Tail, len(got))
		}
		l.Flush()
		got = nextAll(t, cur)
		if len(got) != 1 || string(got[0].Line) != big(n-1) {
			t.Fatalf("tail %d: after the flush: %v", q.Tail, lines(got))
		}
	}
}

// The oldest file kept may begin with the end of a record whose beginning
// was rotated out: it is no record, and neither a tail nor a follower
// shows it. With max_files 0 nothing is split at all.
func TestTheEndOfARecordRotatedOutIsNotShown(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 1, Writer: true})
	_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
	defer cur.Close()
	orphan := false
	for i := 0; i < 200 && !orphan; i++ {
		add(t, l, i, Stdout, big(i))
		b, _ := l.dir.ReadFile(l.name(1))
		line, _, _ := strings.Cut(string(b), "\n")
		_, err := Parse([]byte(line))
		orphan = len(b) > 0 && err != nil
	}
	if !orphan {
		t.Fatal("the oldest file never began inside a record")
	}
	got, c := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: -1})
	c.Close()
	for _, es := range [][]Entry{got, nextAll(t, cur)} {
		if len(es) == 0 {
			t.Fatal("nothing read")
		}
		for _, e := range es {
			if !strings.HasPrefix(string(e.Line), "seq ") || e.TS.IsZero() {
				t.Fatalf("a piece of a record shown: %q", e.Line)
			}
		}
	}

	z := New(d, "z-0", Options{MaxSize: 4096, MaxFiles: 0, Writer: true})
	for i := range 20 {
		add(t, z, i, Stdout, big(i))
	}
	b, _ := z.dir.ReadFile(z.name(0))
	if r, err := Parse([]byte(strings.SplitN(string(b), "\n", 2)[0])); err != nil || !strings.HasPrefix(string(r.Line), "seq ") {
		t.Errorf("with max_files 0 the current file begins inside a record: %.60q", b)
	}
}
