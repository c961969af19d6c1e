package statedir_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

type fullRec struct {
	ID  string `json:"id"`
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

var fullSchema = statedir.Schema[fullRec]{Key: func(r fullRec) string { return r.ID }, KeyField: "id"}

// wholeJournal fails the test unless every line of the journal parses and
// it ends with a newline: no record is ever left half written.
func wholeJournal(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s ends mid-record: ...%q", path, b[max(0, len(b)-40):])
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) > 0 && !json.Valid(line) {
			t.Errorf("%s line %d is torn: %q", path, i+1, line)
		}
	}
}

// TestATableOnAFullDisk: once the disk is full, a change still lands in
// memory and a write of the journal fails whole (never half a record),
// the health names the journal, a Commit is refused and changes nothing;
// once there is room again, what could not be written is written, and
// the files on disk give back every record.
func TestATableOnAFullDisk(t *testing.T) {
	disk := testutil.SmallDisk(t, "256k")
	d, err := statedir.Open(filepath.Join(disk, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tb := statedir.OpenTable(d, "t.json", fullSchema, nil)
	defer tb.Close()
	pad := string(bytes.Repeat([]byte("x"), 300))
	for i := range 5 {
		tb.Set(fullRec{ID: fmt.Sprint("k", i), N: 1, Pad: pad})
	}
	filler := testutil.Fill(t, disk)
	// Changes until the journal's last page is full too.
	n := 0
	for ; n < 10000 && tb.Err() == nil; n++ {
		tb.Set(fullRec{ID: fmt.Sprint("k", n%5), N: n + 2, Pad: pad})
	}
	if tb.Err() == nil {
		t.Fatalf("10000 records written on a full disk")
	}
	if !statedir.NoSpace(tb.Err()) {
		t.Errorf("the error is not the disk's: %v", tb.Err())
	}
	wholeJournal(t, d.Join("t.json.log"))
	failing := d.Health().Failing()
	if len(failing) == 0 || failing[0].File != "t.json.log" && failing[len(failing)-1].File != "t.json.log" {
		t.Errorf("health while full: %+v", failing)
	}
	before, _ := tb.Get("k0")
	if err := tb.Commit(fullRec{ID: "k0", N: -1, Pad: pad}); err == nil {
		t.Fatal("a Commit on a full disk said it was kept")
	}
	if r, _ := tb.Get("k0"); r != before {
		t.Errorf("a refused Commit changed the record: %+v, was %+v", r, before)
	}
	tb.Put(fullRec{ID: "k9", N: 9})
	tb.Delete("k1")
	if err := tb.Sync(); err == nil {
		t.Error("Sync on a full disk said it wrote")
	}
	wholeJournal(t, d.Join("t.json.log"))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := tb.Commit(fullRec{ID: "k0", N: -1}); err != nil {
		t.Fatalf("a Commit once there is room: %v", err)
	}
	wholeJournal(t, d.Join("t.json.log"))
	want := tb.Records()
	l, err := statedir.LoadTable(d, "t.json", fullSchema, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(l.Records) != fmt.Sprint(want) {
		t.Errorf("on disk after the disk had room again:\n got %v\nwant %v", l.Records, want)
	}
	testutil.Eventually(t, "the health to heal", func() bool { return len(d.Health().Failing()) == 0 })
	if healed := d.Health().Healed(); len(healed) == 0 || healed[0].Errors == 0 {
		t.Errorf("healed: %+v", healed)
	}
	if d.Health().Errors()["t.json.log"] == 0 {
		t.Errorf("errors by file: %v", d.Health().Errors())
	}
}

// TestCommitsShareTheirFlushes: a thousand concurrent Commits are all
// kept, each flushed (the flushes shared: a group commit; how many it took
// is logged, not asserted, as it depends on the scheduler).
func TestCommitsShareTheirFlushes(t *testing.T) {
	d, err := statedir.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tb := statedir.OpenTable(d, "t.json", fullSchema, nil)
	defer tb.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	flushed := statedir.Fsyncs()
	start := time.Now()
	for i := range 1000 {
		wg.Go(func() { errs <- tb.Commit(fullRec{ID: fmt.Sprint("k", i), N: i}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("1000 concurrent Commits in %v, %d fsyncs", time.Since(start), statedir.Fsyncs()-flushed)
	if got := len(tb.Records()); got != 1000 {
		t.Errorf("%d records kept, want 1000", got)
	}
	l, err := statedir.LoadTable(d, "t.json", fullSchema, time.Now())
	if err != nil || len(l.Records) != 1000 {
		t.Errorf("on disk: %d records, %v", len(l.Records), err)
	}
}
