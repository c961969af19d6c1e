package events

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpenAnyFile opens a log whose current file holds arbitrary bytes (a
// torn line, zeros after a machine crash, junk): Open and Since must not
// fail on them, and the next event must land on a line of its own that a
// later Open reads back.
func FuzzOpenAnyFile(f *testing.F) {
	good := `{"seq":7,"ts":"2026-12-02T09:00:00.000Z","kind":"daemon","phase":"started"}`
	f.Add("")
	f.Add("\n")
	f.Add(good + "\n")
	f.Add(good)
	f.Add(good + "\n" + good[:20])
	f.Add(good + "\n\x00\x00\x00\x00")
	f.Add(`{"seq":3,` + strings.Repeat("x", 70000))
	f.Add(strings.Repeat("\n", 3) + good + "\n{}\n[]\n" + `{"seq":-1}` + "\n")
	f.Add(`{"seq":18446744073709551615,"kind":"x"}` + "\n")
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "events-2026-12-02.jsonl")
		writeFile(t, path, content)
		clk := newClock(t, "2026-12-02T10:00:00Z")
		l, err := Open(Options{Dir: dir, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Since(0, 0); err != nil {
			t.Fatal(err)
		}
		last := l.LastSeq()
		if last == ^uint64(0) {
			l.Close()
			return // no seq left; not a state a real log reaches
		}
		e := l.Publish(spawned(1))
		l.Close()
		if e.Seq != last+1 {
			t.Fatalf("seq %d after last %d", e.Seq, last)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := e.MarshalJSON()
		tail := append(line, '\n')
		if !bytes.HasSuffix(raw, tail) || !(len(raw) == len(tail) || raw[len(raw)-len(tail)-1] == '\n') {
			t.Fatalf("the event is not on a line of its own: %q", raw)
		}
		l2, err := Open(Options{Dir: dir, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if l2.LastSeq() != e.Seq {
			t.Fatalf("reopened LastSeq %d, want %d", l2.LastSeq(), e.Seq)
		}
	})
}
