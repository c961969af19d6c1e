package runs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

const journalName = FileName + ".log"

func load(t *testing.T, d *statedir.Dir) Loaded {
	t.Helper()
	l, err := Load(d, t0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ids(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func TestRecordsSurviveAndCoalesce(t *testing.T) {
	d := testutil.StateDir(t)
	if l := load(t, d); l.Records != nil || l.Problems != nil {
		t.Fatalf("missing file: %+v", l)
	}
	f := Open(d, []Record{{ID: "a:0", PID: 10, StartTicks: 100, Run: 3, StartedAt: t0}})
	for i := 0; i < 1000; i++ { // a burst is written a few times, not a thousand
		f.Set(Record{ID: "b:0", PID: 20 + i, StartTicks: 200, Run: i + 1, StartedAt: t0})
	}
	f.Delete("a:0")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	recs := load(t, d).Records
	if len(recs) != 1 || recs[0].ID != "b:0" || recs[0].PID != 1019 || recs[0].Run != 1000 || !recs[0].StartedAt.Equal(t0) {
		t.Fatalf("records after close: %+v", recs)
	}
	names, _ := d.Names()
	slices.Sort(names)
	if !slices.Equal(names, []string{FileName, journalName}) {
		t.Errorf("files left: %v", names)
	}
}

func TestASpawnIsRecordedBeforeSetReturns(t *testing.T) {
	d := testutil.StateDir(t)
	f := Open(d, nil)
	defer f.Close()
	f.Set(Record{ID: "w:0", PID: 42, StartTicks: 7, Run: 1})
	f.Set(Record{ID: "w:1", PID: 43, StartTicks: 8, Run: 1})
	f.Delete("w:1")
	// A daemon killed now: nothing compacted yet, the journal has it all.
	recs := load(t, d).Records
	if len(recs) != 1 || recs[0].ID != "w:0" || recs[0].PID != 42 {
		t.Fatalf("records seen by the next daemon: %+v", recs)
	}
	// A torn last line, as a kill mid-write leaves, is skipped.
	j, _ := os.OpenFile(d.Join(journalName), os.O_WRONLY|os.O_APPEND, 0)
	j.WriteString(`{"id":"w:2","pid":4`)
	j.Close()
	if l := load(t, d); len(l.Records) != 1 || l.Problems != nil {
		t.Fatalf("with a torn line: %+v", l)
	}
}

// TestOpenKeepsWhatWasLoaded: the records no instance has claimed yet are
// written back, never replaced by an empty list.
func TestOpenKeepsWhatWasLoaded(t *testing.T) {
	d := testutil.StateDir(t)
	f := Open(d, []Record{{ID: "a:0", PID: 10, StartTicks: 1}, {ID: "b:0", PID: 11, StartTicks: 2}})
	f.Close()
	f = Open(d, load(t, d).Records)
	b, _ := d.ReadFile(FileName)
	if !strings.Contains(string(b), `"a:0"`) || !strings.Contains(string(b), `"b:0"`) {
		t.Errorf("runs.json at Open: %s", b)
	}
	f.DeleteRun("a:0", 99) // another run: kept
	f.DeleteRun("b:0", 11)
	f.Close()
	f.Close() // idempotent
	if got := ids(load(t, d).Records); !slices.Equal(got, []string{"a:0"}) {
		t.Errorf("after DeleteRun: %v", got)
	}
}

// writeRecords leaves runs.json and its journal as a daemon killed after a
// compaction does.
func writeRecords(t *testing.T, d *statedir.Dir, n int) {
	t.Helper()
	f := Open(d, nil)
	for i := range n {
		f.Set(Record{ID: "w:" + string(rune('0'+i)), PID: 100 + i, StartTicks: uint64(i + 1), Run: 1, StartedAt: t0})
	}
	f.Close()
}

func TestACorruptRunsJSONIsSetAsideAndReadAsFarAsItCan(t *testing.T) {
	d := testutil.StateDir(t)
	writeRecords(t, d, 3)
	b, _ := d.ReadFile(FileName)
	lines := strings.Split(string(b), "\n")
	lines[2] = "\x00\x00garbage" // the record of w:1
	bad := strings.Join(lines, "\n")
	os.WriteFile(d.Join(FileName), []byte(bad), 0o600)
	os.Remove(d.Join(journalName)) // runs.json alone

	l := load(t, d)
	if got := ids(l.Records); !slices.Equal(got, []string{"w:0", "w:2"}) {
		t.Errorf("records read from the damaged file: %v", got)
	}
	if len(l.Problems) != 1 || !strings.Contains(l.Problems[0], "runs.json.corrupt-20261202T090000Z") || strings.Contains(l.Problems[0], "\n") {
		t.Errorf("problems: %q", l.Problems)
	}
	aside, err := d.ReadFile("runs.json.corrupt-20261202T090000Z")
	if err != nil || string(aside) != bad {
		t.Errorf("the bad file was not kept aside as it was: %q %v", aside, err)
	}
	if _, err := d.Lstat(FileName); err == nil {
		t.Error("runs.json is still in place")
	}
	// A second bad file the same second does not replace the first.
	os.WriteFile(d.Join(FileName), []byte("{"), 0o600)
	load(t, d)
	if b, _ := d.ReadFile("runs.json.corrupt-20261202T090000Z-2"); string(b) != "{" {
		t.Errorf("second bad file: %q", b)
	}
}

func TestATruncatedRunsJSONLosesNothingWithItsJournal(t *testing.T) {
	d := testutil.StateDir(t)
	writeRecords(t, d, 3)
	b, _ := d.ReadFile(FileName)
	os.WriteFile(d.Join(FileName), b[:len(b)/3], 0o600)
	l := load(t, d)
	if got := ids(l.Records); !slices.Equal(got, []string{"w:0", "w:1", "w:2"}) {
		t.Errorf("records: %v", got)
	}
	if len(l.Problems) != 1 {
		t.Errorf("problems: %q", l.Problems)
	}
	// An empty runs.json (a disk filled up) is no different.
	writeRecords(t, d, 2)
	os.WriteFile(d.Join(FileName), nil, 0o600)
	if got := ids(load(t, d).Records); !slices.Equal(got, []string{"w:0", "w:1"}) {
		t.Errorf("records with an empty runs.json: %v", got)
	}
}

// TestSymlinksAreNeverFollowed: runs.json and its journal planted as
// symlinks to a file elsewhere: the target is neither read nor written.
func TestSymlinksAreNeverFollowed(t *testing.T) {
	d := testutil.StateDir(t)
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte(`[{"id":"x:0","pid":1,"start_ticks":1}]`), 0o600)
	os.Symlink(target, d.Join(FileName))
	os.Symlink(target, d.Join(journalName))
	l := load(t, d)
	if l.Records != nil || len(l.Problems) != 2 {
		t.Errorf("loaded through symlinks: %+v", l)
	}
	f := Open(d, []Record{{ID: "w:0", PID: 5, StartTicks: 5}})
	f.Set(Record{ID: "w:1", PID: 6, StartTicks: 6})
	f.Close()
	if b, _ := os.ReadFile(target); string(b) != `[{"id":"x:0","pid":1,"start_ticks":1}]` {
		t.Errorf("written through a symlink: %s", b)
	}
	if got := ids(load(t, d).Records); !slices.Equal(got, []string{"w:0", "w:1"}) {
		t.Errorf("records: %v", got)
	}
}

func TestFormatParsesBack(t *testing.T) {
	list := []Record{{ID: "a:0", PID: 1, StartTicks: 2, Run: 3, StartedAt: t0}, {ID: "b:1", PID: 4}}
	got, err := Parse(Format(list))
	if err != nil || len(got) != 2 || got[0] != list[0] || got[1] != list[1] {
		t.Errorf("Parse(Format) = %+v %v", got, err)
	}
	if got, err := Parse(Format(nil)); err != nil || len(got) != 0 {
		t.Errorf("empty: %+v %v", got, err)
	}
}

// TestTheJournalIsAppliedWhenRunsJSONCannotBeRead: runs.json replaced by
// something that is not a file (here a FIFO, which must not block the
// read either): set aside, and every record comes from the journal.
func TestTheJournalIsAppliedWhenRunsJSONCannotBeRead(t *testing.T) {
	d := testutil.StateDir(t)
	writeRecords(t, d, 2)
	os.Remove(d.Join(FileName))
	if err := d.Mkfifo(FileName, 0o600); err != nil {
		t.Fatal(err)
	}
	l := load(t, d)
	if got := ids(l.Records); !slices.Equal(got, []string{"w:0", "w:1"}) || len(l.Problems) != 1 {
		t.Errorf("records %v, problems %q", got, l.Problems)
	}
	if _, err := d.Lstat("runs.json.corrupt-20261202T090000Z"); err != nil {
		t.Errorf("the FIFO was not set aside: %v", err)
	}
}
