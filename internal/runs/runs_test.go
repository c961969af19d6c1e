package runs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRecordsSurviveAndCoalesce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	if recs, err := Load(path); err != nil || recs != nil {
		t.Fatalf("missing file: %v %v", recs, err)
	}
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	f := Open(path, []Record{{ID: "a:0", PID: 10, StartTicks: 100, Run: 3, StartedAt: t0}})
	for i := 0; i < 1000; i++ { // a burst is written a few times, not a thousand
		f.Set(Record{ID: "b:0", PID: 20 + i, StartTicks: 200, Run: i + 1, StartedAt: t0})
	}
	f.Delete("a:0")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != "b:0" || recs[0].PID != 1019 || recs[0].Run != 1000 || !recs[0].StartedAt.Equal(t0) {
		t.Fatalf("records after close: %+v", recs)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".runs-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	os.WriteFile(path, []byte("{torn"), 0o600)
	if _, err := Load(path); err == nil {
		t.Error("a corrupt file loads without error")
	}
}

func TestASpawnIsRecordedBeforeSetReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	f := Open(path, nil)
	defer f.Close()
	f.Set(Record{ID: "w:0", PID: 42, StartTicks: 7, Run: 1})
	f.Set(Record{ID: "w:1", PID: 43, StartTicks: 8, Run: 1})
	f.Delete("w:1")
	// A daemon killed now: nothing compacted yet, the journal has it all.
	recs, err := Load(path)
	if err != nil || len(recs) != 1 || recs[0].ID != "w:0" || recs[0].PID != 42 {
		t.Fatalf("records seen by the next daemon: %+v %v", recs, err)
	}
	// A torn last line, as a kill mid-write leaves, is skipped.
	j, _ := os.OpenFile(path+".log", os.O_WRONLY|os.O_APPEND, 0)
	j.WriteString(`{"id":"w:2","pid":4`)
	j.Close()
	if recs, err := Load(path); err != nil || len(recs) != 1 {
		t.Fatalf("with a torn line: %+v %v", recs, err)
	}
}
