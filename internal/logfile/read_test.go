package logfile

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// read is Read into a slice.
func read(t *testing.T, srcs []Source, q Query) ([]Entry, *Cursor) {
	t.Helper()
	var out []Entry
	cur, err := Read(srcs, q, func(e *Entry) error {
		c := *e
		c.Line = bytes.Clone(e.Line)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, cur
}

// lines renders entries as "ID stream line" strings.
func lines(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID + " " + e.Stream.String() + " " + string(e.Line)
	}
	return out
}

func add(t *testing.T, l *Log, ms int, s Stream, line string) {
	t.Helper()
	if err := l.Add(Record{TS: t0.Add(time.Duration(ms) * time.Millisecond), Stream: s, Line: []byte(line)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestReadMergesInTimeOrderWithStreams(t *testing.T) {
	d := testutil.StateDir(t)
	a := New(d, "a-0", Options{MaxSize: 4096, MaxFiles: 2})
	b := New(d, "b-0", Options{MaxSize: 4096, MaxFiles: 2})
	add(t, a, 10, Stdout, "a out 1")
	add(t, b, 15, Stderr, "b err 1")
	add(t, a, 20, Stderr, "a err 2")
	add(t, b, 20, Stdout, "b out 2") // same time as a's: a first, as the sources are given
	add(t, b, 30, Stdout, "b out 3")
	add(t, a, 40, Tend, "a note")
	srcs := []Source{{ID: "a:0", Log: a}, {ID: "b:0", Log: b}}
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{Tail: -1}, "a:0 stdout a out 1|b:0 stderr b err 1|a:0 stderr a err 2|b:0 stdout b out 2|b:0 stdout b out 3|a:0 tend a note"},
		{Query{Tail: 3}, "b:0 stdout b out 2|b:0 stdout b out 3|a:0 tend a note"},
		{Query{Tail: 0}, ""},
		{Query{Tail: -1, Stderr: true}, "b:0 stderr b err 1|a:0 stderr a err 2"},
		{Query{Tail: 1, Stderr: true}, "a:0 stderr a err 2"},
		{Query{Tail: -1, Since: t0.Add(20 * time.Millisecond)}, "a:0 stderr a err 2|b:0 stdout b out 2|b:0 stdout b out 3|a:0 tend a note"},
		{Query{Tail: 2, Since: t0.Add(35 * time.Millisecond)}, "a:0 tend a note"},
	} {
		got, cur := read(t, srcs, tc.q)
		cur.Close()
		if s := strings.Join(lines(got), "|"); s != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.q, s, tc.want)
		}
	}
}

func TestReadTailAcrossRotatedFiles(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 10})
	numbered(t, l, 0, 300, Stdout)
	if _, err := os.Stat(d.Join(l.name(3))); err != nil {
		t.Fatalf("expected several rotated files: %v", err)
	}
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: 120})
	cur.Close()
	if len(got) != 120 {
		t.Fatalf("%d records, want 120", len(got))
	}
	for i, e := range got {
		if n := seqOf(t, e.Line); n != 180+i {
			t.Fatalf("record %d is seq %d, want %d", i, n, 180+i)
		}
	}
}

// nextAll calls Next until it has nothing more to read at once.
func nextAll(t *testing.T, c *Cursor) []Entry {
	t.Helper()
	var all []Entry
	for {
		got, more, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		if !more {
			return all
		}
	}
}

// A follower sees every record once, in order, however many rotations
// happened between two reads (within what max_files keeps), and is woken
// by the writer.
func TestFollowAcrossRotation(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 5, Writer: true})
	numbered(t, l, 0, 10, Stdout)
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: 2})
	defer cur.Close()
	if len(got) != 2 || seqOf(t, got[1].Line) != 9 {
		t.Fatalf("tail: %v", lines(got))
	}
	wake := cur.C()
	if got, more, _ := cur.Next(); len(got) != 0 || more {
		t.Fatalf("nothing new yet, got %v", lines(got))
	}
	next := 10
	for burst := range 8 {
		numbered(t, l, next, 40+burst*5, Stdout) // one to three rotations each
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("no notification from the writer")
		}
		for _, e := range nextAll(t, cur) {
			if n := seqOf(t, e.Line); n != next {
				t.Fatalf("burst %d: seq %d, want %d", burst, n, next)
			}
			next++
		}
	}
	if next != 10+8*40+5*28 {
		t.Errorf("followed up to seq %d", next)
	}
}

// A follower that fell behind by more than one read holds catches up in
// several, losing nothing.
func TestFollowCatchesUpInSteps(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 64 << 20, MaxFiles: 1, Writer: true})
	_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
	defer cur.Close()
	const n = 20000 // about 4 MiB
	numbered(t, l, 0, n, Stdout)
	calls := 0
	var all []Entry
	for {
		got, more, _ := cur.Next()
		calls++
		all = append(all, got...)
		if !more {
			break
		}
	}
	if calls < 3 || len(all) != n {
		t.Fatalf("%d records in %d calls", len(all), calls)
	}
	for i, e := range all {
		if seqOf(t, e.Line) != i {
			t.Fatalf("record %d is %q", i, e.Line)
		}
	}
}

// A record still being written (a torn end of the file) is not handed on
// until it is whole; a log written by another process is read by polling.
func TestFollowWaitsForWholeRecords(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{}) // not this process's: polled
	_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
	defer cur.Close()
	f, err := os.OpenFile(d.Join("w-0.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("2026-12-03T01:00:00.000Z err | hel")
	if got, _, _ := cur.Next(); len(got) != 0 {
		t.Fatalf("a torn record was handed on: %v", lines(got))
	}
	f.WriteString("lo\nplain\n")
	got, _, _ := cur.Next()
	if s := strings.Join(lines(got), "|"); s != "w:0 stderr hello|w:0 stdout plain" {
		t.Fatalf("got %s", s)
	}
}

// A follower away for longer than max_files covers goes on from the
// oldest file kept: following the writer here, a shared log, or a log
// written elsewhere (known by inode, which the dropped file's successor
// may have again).
func TestFollowAfterItsFileWasDropped(t *testing.T) {
	for _, o := range []Options{{Writer: true}, {Writer: true, Shared: true}, {}} {
		d := testutil.StateDir(t)
		o.MaxSize, o.MaxFiles = 4096, 1
		l := New(d, "w-0", o)
		numbered(t, l, 0, 5, Stdout)
		_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
		defer cur.Close()
		numbered(t, l, 5, 300, Stdout)
		got := nextAll(t, cur)
		if len(got) == 0 || seqOf(t, got[len(got)-1].Line) != 304 {
			t.Fatalf("%+v: got %d records", o, len(got))
		}
		first := seqOf(t, got[0].Line)
		for i, e := range got {
			if seqOf(t, e.Line) != first+i {
				t.Fatalf("%+v: a gap inside what was kept at %d", o, i)
			}
		}
	}
}

// A tail over many sources keeps the newest lines of them all together,
// trimming what falls behind as it goes.
func TestTailOverManySources(t *testing.T) {
	d := testutil.StateDir(t)
	var srcs []Source
	for k := range 6 {
		l := New(d, "m-"+strconv.Itoa(k), Options{})
		for i := range 50 {
			if err := l.Add(Record{TS: t0.Add(time.Duration(i*10+k) * time.Millisecond), Line: []byte(fmt.Sprintf("%d.%d", i, k))}); err != nil {
				t.Fatal(err)
			}
		}
		l.Flush()
		srcs = append(srcs, Source{ID: "m:" + strconv.Itoa(k), Log: l})
	}
	got, cur := read(t, srcs, Query{Tail: 9})
	cur.Close()
	want := "48.3 48.4 48.5 49.0 49.1 49.2 49.3 49.4 49.5"
	var s []string
	for _, e := range got {
		s = append(s, string(e.Line))
	}
	if strings.Join(s, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(s, " "), want)
	}
}
