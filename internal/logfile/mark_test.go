package logfile

import (
	"testing"

	"github.com/tend-sh/tend/internal/testutil"
)

// A follower resumed from its mark by another Log of the same files (the
// daemon after an upgrade in place, whose Log counts no rotation yet)
// goes on with the next record, across the rotations in between: none is
// lost or repeated. Sources the mark does not name are left out.
func TestResumeFromAMark(t *testing.T) {
	d := testutil.StateDir(t)
	before := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 5, Writer: true})
	numbered(t, before, 0, 10, Stdout)
	_, cur := read(t, []Source{{ID: "w:0", Log: before}}, Query{Tail: 2})
	cur.Close()
	mark := cur.Mark()
	numbered(t, before, 10, 60, Stdout) // rotates: the mark's file is now an older one
	before.CloseFile()

	after := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 5, Writer: true})
	other := New(d, "o-0", Options{MaxSize: 4096, MaxFiles: 5, Writer: true})
	numbered(t, other, 0, 3, Stdout)
	numbered(t, after, 70, 10, Stdout)
	res, err := Resume([]Source{{ID: "o:0", Log: other}, {ID: "w:0", Log: after}}, mark, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	next := 10
	for _, e := range nextAll(t, res) {
		if e.ID != "w:0" || seqOf(t, e.Line) != next {
			t.Fatalf("%s %q, want w:0's seq %d", e.ID, e.Line, next)
		}
		next++
	}
	if next != 80 {
		t.Errorf("resumed up to seq %d, want 80", next)
	}
	for _, bad := range []string{"", "w:0", "w:0/1", "w:0/x/0", "w:0/1/-1", "w:0/1/0,"} {
		if _, err := Resume(nil, bad, false, false); err == nil {
			t.Errorf("mark %q: no error", bad)
		}
	}
}
