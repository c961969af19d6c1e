package statedir

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// rec is a record shaped like the ones tend keeps per instance.
type rec struct {
	ID    string `json:"id"`
	N     int    `json:"n"`
	State string `json:"state,omitempty"`
}

var recSchema = Schema[rec]{Key: func(r rec) string { return r.ID }, KeyField: "id", Valid: func(r rec) bool { return r.N >= 0 }}

func loadRecs(t *testing.T, d *Dir) TableLoad[rec] {
	t.Helper()
	l, err := LoadTable(d, "t.json", recSchema, t0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Every change is in the journal when the call returns; deletes, the
// conditional one included, are journaled as "gone" lines, and the
// journal of an older tend (a delete line with every field) still reads.
func TestTableJournalsEveryChange(t *testing.T) {
	d := openTestDir(t)
	tb := OpenTable(d, "t.json", recSchema, []rec{{ID: "a", N: 1}})
	defer tb.Close()
	tb.Set(rec{ID: "b", N: 2})
	tb.Set(rec{ID: "c", N: 3})
	tb.Delete("a")
	tb.DeleteIf("b", func(r rec) bool { return r.N == 99 }) // kept
	tb.DeleteIf("c", func(r rec) bool { return r.N == 3 })
	if r, ok := tb.Get("b"); !ok || r.N != 2 {
		t.Errorf("Get: %+v %v", r, ok)
	}
	// A daemon killed now: nothing compacted yet, the journal has it all.
	if l := loadRecs(t, d); len(l.Records) != 1 || l.Records[0] != (rec{ID: "b", N: 2}) || l.Problems != nil {
		t.Fatalf("loaded: %+v", l)
	}
	j, _ := os.OpenFile(d.Join("t.json.log"), os.O_WRONLY|os.O_APPEND, 0)
	j.WriteString(`{"id":"b","n":0,"state":"","gone":true}` + "\n" + `{"id":"x","n":-1}` + "\n" + `{"id":"d","n":4`)
	j.Close()
	if l := loadRecs(t, d); len(l.Records) != 0 || l.Problems != nil {
		t.Fatalf("after an old-form delete, an invalid record and a torn line: %+v", l)
	}
}

// At 10,000 instances the files stay bounded: one line per key in the
// file, and the journal starts over from a snapshot at each compaction
// however many changes came before.
func TestTableStaysBoundedAt10000Keys(t *testing.T) {
	d := openTestDir(t)
	tb := OpenTable[rec](d, "t.json", recSchema, nil)
	const keys = 10000
	for round := range 5 {
		for i := range keys {
			tb.Set(rec{ID: fmt.Sprintf("worker:%d", i), N: round, State: "backoff"})
		}
	}
	tb.mu.Lock()
	if err := tb.compactLocked(); err != nil {
		t.Fatal(err)
	}
	tb.mu.Unlock()
	tb.Set(rec{ID: "worker:0", N: 9})
	file, _ := d.ReadFile("t.json")
	journal, _ := d.ReadFile("t.json.log")
	if n := strings.Count(string(file), "\n"); n != keys+2 {
		t.Errorf("t.json has %d lines for %d keys", n, keys)
	}
	if n := strings.Count(string(journal), "\n"); n != keys+1 {
		t.Errorf("the journal has %d lines after a compaction and one change, want %d", n, keys+1)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	l := loadRecs(t, d)
	if len(l.Records) != keys || l.Records[0] != (rec{ID: "worker:0", N: 9}) || l.Records[1].N != 4 {
		t.Errorf("loaded %d records, first %+v %+v", len(l.Records), l.Records[0], l.Records[1])
	}
}

// A file that does not parse is set aside, read as far as it can be, and
// the journal applied on top; one that cannot be read at all leaves the
// journal to say everything.
func TestTableSetsADamagedFileAside(t *testing.T) {
	d := openTestDir(t)
	tb := OpenTable(d, "t.json", recSchema, []rec{{ID: "a", N: 1}, {ID: "b", N: 2}, {ID: "c", N: 3}})
	tb.Close()
	b, _ := d.ReadFile("t.json")
	lines := strings.Split(string(b), "\n")
	lines[2] = "garbage" // b's line
	os.WriteFile(d.Join("t.json"), []byte(strings.Join(lines, "\n")), 0o600)
	os.WriteFile(d.Join("t.json.log"), []byte(`{"id":"d","n":4}`+"\n"), 0o600)
	l := loadRecs(t, d)
	if len(l.Records) != 3 || l.Records[0].ID != "a" || l.Records[1].ID != "c" || l.Records[2].ID != "d" {
		t.Errorf("records: %+v", l.Records)
	}
	if len(l.Problems) != 1 || !strings.Contains(l.Problems[0], "set aside as t.json.corrupt-20261202T090000Z, 2 records read from it") {
		t.Errorf("problems: %q", l.Problems)
	}
	d.Mkfifo("t.json", 0o600)
	l = loadRecs(t, d)
	if len(l.Records) != 1 || len(l.Problems) != 1 || !strings.Contains(l.Problems[0], "cannot be read") {
		t.Errorf("a FIFO: %+v", l)
	}
	if _, err := d.Lstat("t.json.corrupt-20261202T090000Z-2"); err != nil {
		t.Errorf("the FIFO was not set aside: %v", err)
	}
}

// Put leaves the journal line to the writer; Sync (and Close) write what
// waits at once, and a Delete after a Put is not undone
// by the Put's late line.
func TestTablePutIsJournaledOffTheCaller(t *testing.T) {
	d := openTestDir(t)
	tb := OpenTable[rec](d, "t.json", recSchema, nil)
	defer tb.Close()
	for i := range 100 {
		tb.Put(rec{ID: "a", N: i})
	}
	tb.Put(rec{ID: "b", N: 1})
	tb.Delete("b")
	tb.Sync()
	l := loadRecs(t, d)
	if len(l.Records) != 1 || l.Records[0] != (rec{ID: "a", N: 99}) {
		t.Fatalf("after Sync: %+v", l)
	}
	tb.Put(rec{ID: "c", N: 3})
	deadline := time.Now().Add(10 * time.Second)
	for len(loadRecs(t, d).Records) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not journal a Put")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
