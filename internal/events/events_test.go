package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// clock is an injectable clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

func newClock(t *testing.T, rfc3339 string) *clock {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, rfc3339)
	if err != nil {
		t.Fatal(err)
	}
	return &clock{t: v}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openLog opens a log and closes it when the test ends.
func openLog(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func spawned(pid int) program.Event {
	return program.Event{Kind: program.KindSpawned, ID: "w:0", Program: "w", Data: program.Spawned{PID: pid, Run: 1}}
}

func seqsOf(evs []program.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// span returns from, from+1, ..., to.
func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func since(t *testing.T, l *Log, after uint64, limit int) []uint64 {
	t.Helper()
	evs, err := l.Since(after, limit)
	if err != nil {
		t.Fatal(err)
	}
	return seqsOf(evs)
}

func auditFiles(t *testing.T, dir string) []string {
	t.Helper()
	d, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	files, err := ListFiles(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	return names
}

func TestPublishWritesOneLinePerEvent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	clk := newClock(t, "2026-12-02T09:00:00.123456Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now})

	got := l.Publish(spawned(4242))
	if got.Seq != 1 || !got.TS.Equal(time.Date(2026, 12, 2, 9, 0, 0, 123e6, time.UTC)) {
		t.Fatalf("Publish = seq %d ts %v, want seq 1 at 09:00:00.123", got.Seq, got.TS)
	}
	code := 1
	l.Publish(program.Event{Kind: program.KindExited, ID: "w:0", Program: "w",
		Data: program.Exited{PID: 4242, Code: &code, LikelyCause: "runtime_error"}})

	raw, err := os.ReadFile(filepath.Join(dir, "events-2026-12-02.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	if len(lines) != 3 || lines[2] != "" {
		t.Fatalf("file = %q, want two lines each ending in \\n", raw)
	}
	want := `{"seq":1,"ts":"2026-12-02T09:00:00.123Z","kind":"spawned","id":"w:0","program":"w","pid":4242,"run":1}`
	if lines[0] != want {
		t.Errorf("line 1 = %s\nwant     %s", lines[0], want)
	}
	var exited map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &exited); err != nil {
		t.Fatal(err)
	}
	if exited["seq"] != 2.0 || exited["code"] != 1.0 || exited["signal"] != nil {
		t.Errorf("line 2 = %s", lines[1])
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("audit dir mode %v, want 0700", fi.Mode().Perm())
	}

	evs, err := l.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Kind != program.KindSpawned || !evs[0].TS.Equal(got.TS) {
		t.Fatalf("Since(0) = %+v", evs)
	}
	if p, ok := evs[0].Data.(*program.Spawned); !ok || p.PID != 4242 {
		t.Errorf("Data = %#v, want *program.Spawned{PID: 4242}", evs[0].Data)
	}
	if l.Published() != 2 || l.LastSeq() != 2 {
		t.Errorf("Published %d LastSeq %d, want 2 2", l.Published(), l.LastSeq())
	}
}

func TestSeqContinuesAfterReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l.Publish(spawned(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if e := l.Publish(spawned(9)); e.Seq != 0 {
		t.Errorf("Publish after Close numbered the event: %d", e.Seq)
	}

	l = openLog(t, Options{Dir: dir})
	if got := l.LastSeq(); got != 3 {
		t.Fatalf("LastSeq after reopen = %d, want 3", got)
	}
	if e := l.Publish(spawned(3)); e.Seq != 4 {
		t.Fatalf("next seq = %d, want 4", e.Seq)
	}
	if got := since(t, l, 0, 0); !slices.Equal(got, span(1, 4)) {
		t.Errorf("Since(0) = %v", got)
	}
	if l.Published() != 1 {
		t.Errorf("Published = %d, want 1 (since this Open)", l.Published())
	}
}

func TestTornLastLineIsSkipped(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T09:00:00Z")
	l, err := Open(Options{Dir: dir, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l.Publish(spawned(i))
	}
	l.Close()
	// The daemon was killed in the middle of writing seq 4.
	path := filepath.Join(dir, "events-2026-12-02.jsonl")
	appendFile(t, path, `{"seq":4,"ts":"2026-12-02T09:00:00.000Z","kind":"spa`)

	l = openLog(t, Options{Dir: dir, Now: clk.Now})
	if got := l.LastSeq(); got != 3 {
		t.Fatalf("LastSeq = %d, want 3 (the torn line does not count)", got)
	}
	if got := since(t, l, 0, 0); !slices.Equal(got, span(1, 3)) {
		t.Fatalf("Since(0) before publishing = %v", got)
	}
	if e := l.Publish(spawned(4)); e.Seq != 4 {
		t.Fatalf("next seq = %d, want 4", e.Seq)
	}
	if got := since(t, l, 0, 0); !slices.Equal(got, span(1, 4)) {
		t.Errorf("Since(0) = %v, want 1..4", got)
	}
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if n := len(lines); n != 5 || !strings.HasPrefix(lines[4], `{"seq":4,`) || !strings.HasSuffix(lines[3], `"kind":"spa`) {
		t.Errorf("the new line does not start on a fresh line:\n%s", raw)
	}
}

func TestSeqFromOlderFileWhenNewestHasNone(t *testing.T) {
	for name, newest := range map[string]string{
		"empty":     "",
		"torn only": `{"seq":8,"ts":"2026-12-`,
		"junk":      "\x00\x00\x00\x00",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clk := newClock(t, "2026-12-01T10:00:00Z")
			l, err := Open(Options{Dir: dir, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 7 {
				l.Publish(spawned(i))
			}
			l.Close()
			appendFile(t, filepath.Join(dir, "events-2026-12-02.jsonl"), newest)

			clk.Add(24 * time.Hour)
			l = openLog(t, Options{Dir: dir, Now: clk.Now})
			if got := l.LastSeq(); got != 7 {
				t.Fatalf("LastSeq = %d, want 7 from the older file", got)
			}
			if e := l.Publish(spawned(8)); e.Seq != 8 {
				t.Fatalf("next seq = %d, want 8", e.Seq)
			}
			if got := since(t, l, 0, 0); !slices.Equal(got, span(1, 8)) {
				t.Errorf("Since(0) = %v", got)
			}
			if got := since(t, l, 7, 0); !slices.Equal(got, []uint64{8}) {
				t.Errorf("Since(7) = %v", got)
			}
		})
	}
}

func TestLastSeqFindsLineBeforeLongTail(t *testing.T) {
	// The last complete line lies more than one read chunk before the end.
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T09:00:00Z")
	l, err := Open(Options{Dir: dir, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	big := program.Event{Kind: program.KindWedged, Data: program.Wedged{Source: "probe", Detail: strings.Repeat("x", 3*tailChunk)}}
	l.Publish(spawned(1))
	l.Publish(big)
	l.Close()
	appendFile(t, filepath.Join(dir, "events-2026-12-02.jsonl"), `{"seq":3,"ts":"`+strings.Repeat("y", 2*tailChunk))

	l = openLog(t, Options{Dir: dir, Now: clk.Now})
	if got := l.LastSeq(); got != 2 {
		t.Fatalf("LastSeq = %d, want 2", got)
	}
	evs, err := l.Since(1, 0)
	if err != nil || len(evs) != 1 || evs[0].Data.(*program.Wedged).Detail != big.Data.(program.Wedged).Detail {
		t.Fatalf("Since(1) = %d events, %v", len(evs), err)
	}
}

func TestSinceIsExclusiveAndCrossesDays(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T23:59:59.500Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now})
	for range 3 {
		l.Publish(spawned(1))
		clk.Add(100 * time.Millisecond)
	}
	clk.Add(time.Second) // past midnight
	for range 3 {
		l.Publish(spawned(2))
	}
	clk.Add(24 * time.Hour)
	l.Publish(spawned(3))

	want := []string{"events-2026-12-02.jsonl", "events-2026-12-03.jsonl", "events-2026-12-04.jsonl"}
	if got := auditFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("audit files = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		since uint64
		limit int
		want  []uint64
	}{
		{0, 0, span(1, 7)},
		{1, 0, span(2, 7)},
		{3, 0, span(4, 7)},
		{4, 0, span(5, 7)},
		{6, 0, []uint64{7}},
		{7, 0, nil},
		{100, 0, nil},
		{1, 3, span(2, 4)},
		{2, 1, []uint64{3}},
	} {
		if got := since(t, l, tc.since, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("Since(%d, %d) = %v, want %v", tc.since, tc.limit, got, tc.want)
		}
	}
	// Each event sits in the file of its own UTC date.
	evs, _ := l.Since(0, 0)
	for _, e := range evs {
		raw, _ := os.ReadFile(filepath.Join(dir, fileName(e.TS.Format(dayLayout))))
		if !strings.Contains(string(raw), `{"seq":`+itoa(e.Seq)+`,`) {
			t.Errorf("seq %d (ts %v) is not in its day's file", e.Seq, e.TS)
		}
	}
}

func TestClockGoingBackKeepsFileOrder(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-03T00:00:01Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now})
	l.Publish(spawned(1))
	clk.Add(-2 * time.Second) // back to 2026-12-02
	l.Publish(spawned(2))
	if got := auditFiles(t, dir); !slices.Equal(got, []string{"events-2026-12-03.jsonl"}) {
		t.Errorf("audit files = %v, want only the newest day", got)
	}
	if got := since(t, l, 1, 0); !slices.Equal(got, []uint64{2}) {
		t.Errorf("Since(1) = %v", got)
	}
}

func TestSinceSkipsOlderFilesAndJunk(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t, "2026-12-02T12:00:00Z")
	l := openLog(t, Options{Dir: dir, Now: clk.Now})
	for day := range 3 {
		for range 2 {
			l.Publish(spawned(day))
		}
		clk.Add(24 * time.Hour)
	}
	// An older file that cannot matter is unreadable junk; Since(2) must
	// not need it.
	writeFile(t, filepath.Join(dir, "events-2026-12-02.jsonl"), "garbage\n")
	if got := since(t, l, 2, 0); !slices.Equal(got, span(3, 6)) {
		t.Errorf("Since(2) = %v", got)
	}
	writeFile(t, filepath.Join(dir, "notes.txt"), "not an audit file\n")
	if got := since(t, l, 0, 0); !slices.Equal(got, span(3, 6)) {
		t.Errorf("Since(0) = %v, want the parseable events", got)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
