package events

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// seedFile writes an audit file holding one event with the given seq.
func seedFile(t *testing.T, dir, day string, seq uint64) {
	t.Helper()
	writeFile(t, filepath.Join(dir, fileName(day)),
		`{"seq":`+itoa(seq)+`,"ts":"`+day+`T12:00:00.000Z","kind":"daemon","phase":"started"}`+"\n")
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRetentionRemovesOldFilesOnly(t *testing.T) {
	dir := t.TempDir()
	for i, day := range []string{"2026-11-01", "2026-12-01", "2026-12-02", "2026-12-10"} {
		seedFile(t, dir, day, uint64(i+1))
	}
	for _, other := range []string{"notes.txt", "events-2026-13-45.jsonl", "events-2026-11-01.jsonl.bak", "events-1999-01-01.json"} {
		writeFile(t, filepath.Join(dir, other), "keep me\n")
	}
	// Retention 336h from 2026-12-16T12:00 reaches back to 2026-12-02T12:00:
	// the files of 12-01 and before hold only older events; 12-02 still
	// holds events within retention.
	clk := newClock(t, "2026-12-16T12:00:00Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now})
	want := []string{
		"events-1999-01-01.json",
		"events-2026-11-01.jsonl.bak",
		"events-2026-12-02.jsonl",
		"events-2026-12-10.jsonl",
		"events-2026-12-16.jsonl", // opened for appending
		"events-2026-13-45.jsonl",
		"notes.txt",
		"seq.next", // the seq reservation, never pruned
	}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after Open:\n got %v\nwant %v", got, want)
	}
	if l.LastSeq() != 4 {
		t.Errorf("LastSeq = %d, want 4", l.LastSeq())
	}
	if got := since(t, l, 0, 0); !slices.Equal(got, []uint64{3, 4}) {
		t.Errorf("Since(0) = %v, want what retention kept", got)
	}

	clk.Add(24 * time.Hour)
	if err := l.Prune(); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(n string) bool { return n == "events-2026-12-02.jsonl" })
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("after a day:\n got %v\nwant %v", got, want)
	}
}

func TestRetentionKeepsTheCurrentFile(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T23:00:00Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now, Retention: time.Minute})
	l.Publish(spawned(1))
	clk.Add(2 * time.Hour) // the next day, nothing published yet
	if err := l.Prune(); err != nil {
		t.Fatal(err)
	}
	if got := since(t, l, 0, 0); !slices.Equal(got, []uint64{1}) {
		t.Errorf("Since(0) = %v: the file being appended to was removed", got)
	}
	if l.Publish(spawned(2)).Seq != 2 {
		t.Error("seq did not continue")
	}
}

func TestRetentionIsCheckedEveryMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts at 2000-01-01T00:00:00Z.
		dir := t.TempDir()
		seedFile(t, dir, "1999-12-29", 1) // expired at Open
		seedFile(t, dir, "1999-12-30", 2) // expires a day later
		l, err := Open(Options{Dir: dir, Retention: 48 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := auditFiles(t, dir); !slices.Equal(got, []string{"events-1999-12-30.jsonl", "events-2000-01-01.jsonl"}) {
			t.Fatalf("after Open: %v", got)
		}
		time.Sleep(24*time.Hour - pruneEvery) // not yet expired
		synctest.Wait()
		if got := auditFiles(t, dir); len(got) != 2 {
			t.Fatalf("a minute early: %v", got)
		}
		time.Sleep(2 * pruneEvery)
		synctest.Wait()
		if got := auditFiles(t, dir); !slices.Equal(got, []string{"events-2000-01-01.jsonl"}) {
			t.Errorf("a day later: %v", got)
		}
	})
}

func TestOpenRejectsBadOptions(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without Dir succeeded")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Retention: -time.Hour}); err == nil {
		t.Error("Open with negative retention succeeded")
	}
}
