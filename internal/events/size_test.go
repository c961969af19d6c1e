package events

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestSizeCapHoldsWithinOneDay: a single day of events far larger than
// audit_max_size is split into parts and the oldest go, so the directory
// never holds more than the cap, and what is kept reads back without a gap
// from the oldest kept seq, also after a restart.
func TestSizeCapHoldsWithinOneDay(t *testing.T) {
	const capBytes = 64 << 10
	dir := filepath.Join(t.TempDir(), "audit")
	clk := newClock(t, "2026-12-02T09:00:00Z") // one day throughout
	l := openLog(t, Options{Dir: dir, Now: clk.Now, MaxSize: capBytes})
	const n = 5000 // about 100 bytes each: eight times the cap
	for i := range n {
		l.Publish(spawned(i + 1))
		if i%50 == 0 {
			if got := dirBytes(t, dir); got > capBytes {
				t.Fatalf("after %d events the audit dir holds %d bytes, over the cap of %d", i+1, got, capBytes)
			}
		}
	}
	files := auditFiles(t, dir)
	if len(files) < 4 || files[0] == "events-2026-12-02.jsonl" {
		t.Fatalf("files: %v", files)
	}
	if got := dirBytes(t, dir); got < capBytes/2 {
		t.Errorf("the cap removed too much: %d bytes left", got)
	}
	check := func(evs []program.Event) {
		t.Helper()
		if len(evs) == 0 || evs[len(evs)-1].Seq != n || evs[0].Seq == 1 {
			t.Fatalf("kept events: %d, from %d", len(evs), evs[0].Seq)
		}
		for i, e := range evs {
			if e.Seq != evs[0].Seq+uint64(i) {
				t.Fatalf("a gap after seq %d", evs[i-1].Seq)
			}
		}
	}
	evs, err := l.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	check(evs)
	oldest := evs[0].Seq
	if got, _ := l.Since(oldest+10, 3); len(got) != 3 || got[0].Seq != oldest+11 {
		t.Errorf("Since(oldest+10): %v", seqsOf(got))
	}
	s := l.Subscribe(0)
	var backlog []program.Event
	for e := range s.C() {
		backlog = append(backlog, e)
		if e.Seq == n {
			break
		}
	}
	s.Close()
	check(backlog)
	if backlog[0].Seq != oldest {
		t.Errorf("backlog starts at %d, Since at %d", backlog[0].Seq, oldest)
	}
	l.Close()

	// A restart continues the newest part and the numbering.
	l = openLog(t, Options{Dir: dir, Now: clk.Now, MaxSize: capBytes})
	if l.LastSeq() != n {
		t.Fatalf("LastSeq after reopening: %d", l.LastSeq())
	}
	for i := range 2000 {
		l.Publish(spawned(i))
	}
	if got := dirBytes(t, dir); got > capBytes {
		t.Errorf("after a restart: %d bytes", got)
	}
	evs, _ = l.Since(0, 0)
	if len(evs) == 0 || evs[len(evs)-1].Seq != n+2000 {
		t.Fatalf("after a restart: %d events", len(evs))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("a gap after seq %d", evs[i-1].Seq)
		}
	}
}

// TestSizeCapAppliesAtOpen: a directory left over the cap (a daemon that
// ran with a larger one) is brought under it when the log opens.
func TestSizeCapAppliesAtOpen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T09:00:00Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now, MaxSize: 1 << 20})
	for i := range 3000 {
		l.Publish(spawned(i))
	}
	l.Close()
	before := dirBytes(t, dir)
	l = openLog(t, Options{Dir: dir, Now: clk.Now, MaxSize: 64 << 10})
	if got := dirBytes(t, dir); got > 64<<10 || got >= before {
		t.Errorf("after Open with a smaller cap: %d bytes (was %d)", got, before)
	}
	if l.LastSeq() != 3000 {
		t.Errorf("LastSeq: %d", l.LastSeq())
	}
}

func TestFileNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		day  string
		part int
		ok   bool
	}{
		{"events-2026-12-02.jsonl", "2026-12-02", 0, true},
		{"events-2026-12-02.1.jsonl", "2026-12-02", 1, true},
		{"events-2026-12-02.12.jsonl", "2026-12-02", 12, true},
		{"events-2026-12-02.0.jsonl", "", 0, false},
		{"events-2026-12-02.01.jsonl", "", 0, false},
		{"events-2026-12-02.-1.jsonl", "", 0, false},
		{"events-2026-12-02.+1.jsonl", "", 0, false},
		{"events-2026-12-02..jsonl", "", 0, false},
		{"events-2026-12-02x.jsonl", "", 0, false},
		{"events-2026-13-02.jsonl", "", 0, false},
		{"events-2026-12-02.jsonl.bak", "", 0, false},
	} {
		f, ok := ParseFileName(tc.name)
		if ok != tc.ok || ok && (f.Day.Format(dayLayout) != tc.day || f.Part != tc.part || partName(tc.day, tc.part) != tc.name) {
			t.Errorf("ParseFileName(%q) = %+v %v", tc.name, f, ok)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"events-2026-12-03.jsonl", "events-2026-12-02.10.jsonl", "events-2026-12-02.9.jsonl", "events-2026-12-02.jsonl", "events-2026-12-02.1.jsonl"} {
		writeFile(t, filepath.Join(dir, name), "")
	}
	want := []string{"events-2026-12-02.jsonl", "events-2026-12-02.1.jsonl", "events-2026-12-02.9.jsonl", "events-2026-12-02.10.jsonl", "events-2026-12-03.jsonl"}
	if got := auditFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("order: %v", got)
	}
}

// TestASymlinkedAuditFileIsNeverFollowed: an audit file planted as a
// symlink to a file elsewhere: the log refuses to append through it, the
// readers skip it, and the target keeps its content.
func TestASymlinkedAuditFileIsNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	writeFile(t, target, `{"seq":99,"ts":"2026-12-01T12:00:00.000Z","kind":"daemon","phase":"started"}`+"\n")
	clk := newClock(t, "2026-12-02T09:00:00Z")
	if err := os.Symlink(target, filepath.Join(dir, "events-2026-12-02.jsonl")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Now: clk.Now})
	if !errors.Is(err, unix.ELOOP) {
		t.Errorf("Open with today's file a symlink: %v", err)
	}
	os.Remove(filepath.Join(dir, "events-2026-12-02.jsonl"))
	os.Symlink(target, filepath.Join(dir, "events-2026-12-01.jsonl")) // an older day
	l := openLog(t, Options{Dir: dir, Now: clk.Now})
	if l.LastSeq() != 0 {
		t.Errorf("LastSeq read through a symlink: %d", l.LastSeq())
	}
	l.Publish(spawned(1))
	if evs, _ := l.Since(0, 0); len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("Since: %v", seqsOf(evs))
	}
	if b, _ := os.ReadFile(target); !strings.HasPrefix(string(b), `{"seq":99,`) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("target changed: %s", b)
	}
}

// TestOpenThroughAGivenDir: the daemon hands the log its audit directory
// already open; the log does not close it.
func TestOpenThroughAGivenDir(t *testing.T) {
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := Open(Options{Files: d, Now: func() time.Time { return time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	l.Publish(spawned(1))
	l.Close()
	if _, err := d.Lstat("events-2026-12-02.jsonl"); err != nil {
		t.Errorf("after Close, through the dir: %v", err)
	}
}
