package spawn

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/testutil"
)

// raw gives a tty log's bytes back: each record, and a newline after each
// that is not partial.
func raw(es []logfile.Entry) []byte {
	var b []byte
	for _, e := range es {
		if e.Stream != logfile.TTY {
			continue
		}
		b = append(b, e.Line...)
		if !e.Partial {
			b = append(b, '\n')
		}
	}
	return b
}

// keeperWrites appends data to the log of id as the keeper does (package
// keeper): a record a line, the rest partial.
func keeperWrites(t *testing.T, r *rig, id string, data string) {
	t.Helper()
	l := logfile.New(r.c.opts.Logs, baseName(id), logfile.Options{MaxSize: smallLogs.MaxSize, MaxFiles: smallLogs.MaxFiles, Shared: true})
	b := []byte(data)
	for len(b) > 0 {
		rec := logfile.Record{TS: time.Now(), Stream: logfile.TTY, Line: b}
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			rec.Line, b = b[:i], b[i+1:]
		} else {
			rec.Partial, b = true, nil
		}
		if err := l.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.CloseFile()
	r.c.Changed(id) // as the daemon does when the keeper says it wrote
}

type nopCtl struct{}

func (nopCtl) Pause() error { return nil }
func (nopCtl) Resume()      {}

// The daemon does not write a tty run's output (the keeper does): what it
// follows of it counts as output, is forwarded as text lines, and its end
// counts as both streams; TTYTail replays the log and hands back a Cursor
// from exactly where the replay ends.
func TestTTYOutputFollowsTheKeepersLog(t *testing.T) {
	var mu sync.Mutex
	var fwd bytes.Buffer
	r := newRig(t, CaptureOptions{Forward: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return fwd.Write(p)
	})})
	o := NewTTYOutput(r.c, "t:0", smallLogs)
	start := o.TTYFollow()
	if start == nil {
		t.Fatal("no cursor")
	}
	defer start.Close()
	const first = "\x1b[1mbold\x1b[0m line\r\n50%\r100%\r\n> "
	keeperWrites(t, r, "t:0", first)
	es, _, err := start.Next()
	if err != nil || string(raw(es)) != first {
		t.Fatalf("followed %q, %v", raw(es), err)
	}
	take := o.TTYOutput(nopCtl{})
	if !take(raw(es)) {
		t.Fatal("the follower was asked to wait")
	}
	o.Note("a note of the daemon's")
	o.EndTTY()
	testutil.Eventually(t, "the terminal's end counted as both streams", func() bool {
		n, ok := r.c.StreamEnds("t:0")
		return ok && n == 2
	})
	if o.LastActivity().IsZero() {
		t.Error("terminal output did not count as output")
	}
	mu.Lock()
	if got := fwd.String(); got != "t:0 | bold line\nt:0 | 100%\nt:0 | > \n" {
		t.Errorf("forwarded %q", got)
	}
	mu.Unlock()

	tail, at, cur := o.TTYTail(time.Time{}, 1<<20)
	if string(tail) != first || at.IsZero() || cur == nil {
		t.Fatalf("TTYTail = %q at %v", tail, at)
	}
	defer cur.Close()
	keeperWrites(t, r, "t:0", "more\r\n")
	if es, _, _ := cur.Next(); string(raw(es)) != "more\r\n" {
		t.Errorf("after the tail, the cursor read %q", raw(es))
	}
	if tail, _, c := o.TTYTail(time.Time{}, 4); string(tail) != "re\r\n" || c == nil {
		t.Errorf("TTYTail of 4 bytes = %q", tail)
	} else {
		c.Close()
	}
	o.Close()
}
