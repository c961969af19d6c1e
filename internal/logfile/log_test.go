package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

var t0 = time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)

// numbered writes n records "seq N" followed by varying padding, one
// millisecond apart, flushing every few.
func numbered(t *testing.T, l *Log, from, n int, stream Stream) {
	t.Helper()
	for i := from; i < from+n; i++ {
		line := "seq " + strconv.Itoa(i) + " " + strings.Repeat("x", (i*37)%300)
		if err := l.Add(Record{TS: t0.Add(time.Duration(i) * time.Millisecond), Stream: stream, Line: []byte(line)}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

// seqOf reads the number of a numbered record.
func seqOf(t *testing.T, line []byte) int {
	t.Helper()
	f := strings.Fields(string(line))
	if len(f) < 2 || f[0] != "seq" {
		t.Fatalf("not a numbered line: %q", line)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Files rotate at exactly max_size: each rotated file is exactly that
// many bytes (a record that does not fit ends the file and goes on in the
// next), the kept files hold an unbroken run of the newest records, read
// back whole, and the oldest are dropped past max_files.
func TestRotationAtExactly4KiB(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 3, Writer: true})
	const n = 2000
	numbered(t, l, 0, n, Stdout)
	l.CloseFile()

	var stream []byte
	for i := 3; i >= 0; i-- { // oldest first
		name := l.name(i)
		b, err := os.ReadFile(d.Join(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if i > 0 && len(b) != 4096 {
			t.Errorf("%s is %d bytes, want exactly max_size 4096", name, len(b))
		}
		if len(b) > 4096 {
			t.Errorf("%s is %d bytes, over max_size 4096", name, len(b))
		}
		stream = append(stream, b...)
	}
	if _, err := os.Lstat(d.Join(l.name(4))); !os.IsNotExist(err) {
		t.Errorf("a fifth file past max_files 3: %v", err)
	}
	lines := bytes.Split(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n"))
	if _, err := Parse(lines[0]); err == nil {
		t.Log("the oldest file begins with a whole record")
	} else {
		lines = lines[1:] // the end of a record whose beginning was rotated out
	}
	var all []Record
	for _, line := range lines {
		r, err := Parse(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		all = append(all, r)
	}
	first := seqOf(t, all[0].Line)
	if first == 0 {
		t.Fatal("nothing was dropped: write more")
	}
	for i, r := range all {
		if got := seqOf(t, r.Line); got != first+i {
			t.Fatalf("record %d is seq %d, want %d: a record was lost", i, got, first+i)
		}
		if want := t0.Add(time.Duration(first+i) * time.Millisecond); !r.TS.Equal(want) {
			t.Fatalf("seq %d has time %v, want %v", first+i, r.TS, want)
		}
	}
	if last := seqOf(t, all[len(all)-1].Line); last != n-1 {
		t.Errorf("the newest record is seq %d, want %d", last, n-1)
	}
	// tend logs reads the same records, whole, across the files.
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: -1})
	cur.Close()
	if len(got) != len(all) {
		t.Fatalf("Read gave %d records, the files hold %d", len(got), len(all))
	}
	for i, e := range got {
		if string(e.Line) != string(all[i].Line) || e.Partial {
			t.Fatalf("Read's record %d: %q, want %q", i, e.Line, all[i].Line)
		}
	}
}

// A line longer than a file can hold is stored in pieces that each fit.
func TestLongLineIsCutToFitAFile(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 5})
	long := strings.Repeat("0123456789", 1000) // 10,000 bytes
	if err := l.Add(Record{TS: t0, Stream: Stderr, Line: []byte(long)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: -1})
	defer cur.Close()
	var joined []byte
	for i, e := range got {
		joined = append(joined, e.Line...)
		if e.Partial != (i < len(got)-1) {
			t.Errorf("piece %d partial = %v", i, e.Partial)
		}
	}
	if string(joined) != long || len(got) < 3 {
		t.Errorf("%d pieces joined give %d bytes, want %d", len(got), len(joined), len(long))
	}
	for _, name := range []string{l.name(0), l.name(1), l.name(2)} {
		if fi, err := os.Stat(d.Join(name)); err == nil && fi.Size() > 4096 {
			t.Errorf("%s is %d bytes", name, fi.Size())
		}
	}
}

// A log symlinked to a file elsewhere (say root's .bashrc) is never
// written through: the link is replaced by a file of its own. A FIFO
// planted there does not block the writer.
func TestPlantedLogIsNotWrittenThrough(t *testing.T) {
	d := testutil.StateDir(t)
	target := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.Join("w-0.log")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(d.Join("v-0.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Rotation renames: a symlink at a rotated name moves, and is never
	// followed either.
	if err := os.Symlink(target, d.Join("w-0.log.1")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, base := range []string{"w-0", "v-0"} {
			l := New(d, base, Options{MaxSize: 4096, MaxFiles: 2})
			numbered(t, l, 0, 200, Stdout) // rotates a few times
			l.CloseFile()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer blocked on a planted FIFO")
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	for _, name := range []string{"w-0.log", "v-0.log"} {
		fi, err := os.Lstat(d.Join(name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is %v (%v), want a regular file", name, fi.Mode(), err)
		}
	}
}

// A file larger than max_size already (max_size lowered, or a log from
// before records) is rotated before the first record, never grown.
func TestOversizedFileRotatesFirst(t *testing.T) {
	d := testutil.StateDir(t)
	if err := os.WriteFile(d.Join("w-0.log"), bytes.Repeat([]byte("old line\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 1})
	numbered(t, l, 0, 1, Stdout)
	fi, err := os.Stat(d.Join("w-0.log"))
	if err != nil || fi.Size() > 4096 {
		t.Fatalf("current file: %v %v", fi, err)
	}
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: 2})
	cur.Close()
	if len(got) != 2 || string(got[0].Line) != "old line" || !got[0].TS.IsZero() || seqOf(t, got[1].Line) != 0 {
		t.Errorf("tail across the old file: %v", fmt.Sprint(got))
	}
}

// A line with newlines in it (a note of several lines) becomes a record
// per line: a newline never gets into a record.
func TestNewlinesSplitRecords(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{})
	if err := l.Add(Record{TS: t0, Stream: Tend, Line: []byte("reload refused:\nline 3: bad\n")}); err != nil {
		t.Fatal(err)
	}
	l.Flush()
	got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: -1})
	cur.Close()
	if s := strings.Join(lines(got), "|"); s != "w:0 tend reload refused:|w:0 tend line 3: bad" {
		t.Errorf("got %s", s)
	}
}

func TestRemoveTakesEveryFile(t *testing.T) {
	d := testutil.StateDir(t)
	dir := d.Path()
	for _, name := range []string{"w-0.log", "w-0.log.1", "w-0.log.2", "w-0.log.4", "w-1.log", "w-0.logs"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(d, "w-0"); err != nil {
		t.Fatal(err)
	}
	names, _ := d.Names()
	slices.Sort(names)
	// .4 after a gap is not one of the set; other logs are untouched.
	if want := []string{"w-0.log.4", "w-0.logs", "w-1.log"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	if err := Remove(d, "none"); err != nil {
		t.Errorf("a log with no files: %v", err)
	}
}
