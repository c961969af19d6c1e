package logfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// writerEnv makes the test binary a second writer of a shared log (see
// TestMain): "DIR BASE WRITER FROM N MAXSIZE MAXFILES". It waits for a
// line on stdin before writing, so the writers start together.
const writerEnv = "TEND_LOGFILE_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		if err := childWriter(spec); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func childWriter(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 7 {
		return fmt.Errorf("spec %q", spec)
	}
	var v [4]int
	for i := range v {
		n, err := strconv.Atoi(f[3+i])
		if err != nil {
			return err
		}
		v[i] = n
	}
	d, err := statedir.Open(f[0])
	if err != nil {
		return err
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	l := New(d, f[1], Options{MaxSize: int64(v[2]), MaxFiles: v[3], Shared: true})
	defer l.CloseFile()
	if err := writeNumbered(l, f[2], v[0], v[1]); err != nil {
		return err
	}
	_, err = os.Stdout.WriteString("wrote\n")
	return err
}

// sharedLine is record seq of writer w: its number and a padding that
// depends on both (every 97th long enough to take a good part of a
// file), so that a torn or mixed record does not pass for a whole one.
func sharedLine(w string, seq int) string {
	n := (seq*131 + len(w)*17) % 300
	if seq%97 == 5 {
		n = 2500
	}
	return w + " " + strconv.Itoa(seq) + " " + strings.Repeat(string(rune('a'+(seq+len(w))%26)), n)
}

// writeNumbered adds records from to from+n-1 of writer w to l, flushing
// after batches of one to nine records, and pausing a little after each
// so that writers started together write together to the end.
func writeNumbered(l *Log, w string, from, n int) error {
	for i := from; i < from+n; i++ {
		if err := l.Add(Record{TS: time.Now(), Stream: TTY, Line: []byte(sharedLine(w, i))}); err != nil {
			return err
		}
		if i%9 == i%7 || i == from+n-1 {
			if err := l.Flush(); err != nil {
				return err
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	return nil
}

// startWriter starts this test binary as a writer of base in d (see
// writerEnv); it writes once start is called, and wrote is closed once it
// has written all. wait waits for its end, and says how it went.
func startWriter(t *testing.T, d *statedir.Dir, base, w string, from, n int, maxSize int64, maxFiles int) (start func(), wrote <-chan struct{}, wait func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d %d %d %d", writerEnv, d.Path(), base, w, from, n, maxSize, maxFiles))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		bufio.NewReader(out).ReadString('\n')
		close(done)
	}()
	var once sync.Once
	var werr error
	wait = func() error {
		<-done // Wait closes the pipe: its reader first
		once.Do(func() {
			if err := cmd.Wait(); err != nil {
				werr = fmt.Errorf("writer %s: %v: %s", w, err, stderr.String())
			}
		})
		return werr
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // if the test ended before it did
		wait()
	})
	start = func() { in.Write([]byte("go\n")); in.Close() }
	return start, done, wait
}

// checkShared reads the files of base in d as one stream and checks them:
// each file within max_size and every rotated one exactly max_size (with
// max_files 0: one file, cut at record boundaries); every record whole,
// each writer's once and in order, and together the newest of all that
// were written: from 0 if all were kept (whole), to n-1 of each writer.
func checkShared(t *testing.T, d *statedir.Dir, base string, maxSize int64, maxFiles int, n map[string]int, whole bool) {
	t.Helper()
	l := New(d, base, Options{})
	if _, err := d.Lstat(l.nextName()); err == nil {
		t.Errorf("%s left behind", l.nextName())
	}
	if _, err := d.Lstat(l.name(maxFiles + 1)); err == nil {
		t.Errorf("a file past max_files %d", maxFiles)
	}
	var stream []byte
	files := 0
	for i := maxFiles; i >= 0; i-- {
		b, err := os.ReadFile(d.Join(l.name(i)))
		if os.IsNotExist(err) && files == 0 && i > 0 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files++
		if i > 0 && int64(len(b)) != maxSize {
			t.Errorf("%s is %d bytes, want exactly max_size %d", l.name(i), len(b), maxSize)
		}
		if int64(len(b)) > maxSize {
			t.Errorf("%s is %d bytes, over max_size %d", l.name(i), len(b), maxSize)
		}
		if maxFiles == 0 && len(b) > 0 && (!beginsRecord(b) || b[len(b)-1] != '\n') {
			t.Errorf("with max_files 0 a record was cut: the file begins %q, ends %q", b[:min(len(b), 40)], b[max(0, len(b)-40):])
		}
		stream = append(stream, b...)
	}
	if whole && files < 10 {
		t.Fatalf("only %d files: write more to rotate many times", files)
	}
	lines := bytes.Split(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n"))
	if _, err := Parse(lines[0]); err != nil && !whole && maxFiles > 0 {
		lines = lines[1:] // the end of a record whose beginning was rotated out
	}
	next := map[string]int{}
	runs := map[string]int{} // how many times each writer's records begin again after another's
	last := ""
	for i, line := range lines {
		r, err := Parse(line)
		if err != nil {
			t.Fatalf("line %d of the stream %q: %v", i, line, err)
		}
		if r.Partial || r.Stream != TTY {
			t.Fatalf("line %d: %+v", i, r)
		}
		f := strings.SplitN(string(r.Line), " ", 3)
		if len(f) != 3 {
			t.Fatalf("line %d: %q", i, r.Line)
		}
		seq, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("line %d: %q", i, r.Line)
		}
		if string(r.Line) != sharedLine(f[0], seq) {
			t.Fatalf("line %d is not a whole record of %s: %.80q", i, f[0], r.Line)
		}
		want, ok := next[f[0]]
		if !ok && !whole {
			want = seq // the oldest kept
		}
		if seq != want {
			t.Fatalf("line %d: %s's record %d, want %d: one lost, doubled or out of order", i, f[0], seq, want)
		}
		next[f[0]] = seq + 1
		if f[0] != last {
			runs[f[0]]++
			last = f[0]
		}
	}
	t.Logf("%d files; each writer's runs of records: %v", files, runs)
	if whole && runs["child"] < 2 {
		t.Errorf("the other process's records are all in one run: it wrote alone, the test tested nothing")
	}
	for w, total := range n {
		if got, ok := next[w]; (ok || whole) && got != total {
			t.Errorf("writer %s: its records end before %d, want %d", w, got, total)
		}
	}
	if len(next) == 0 {
		t.Error("no record kept")
	}
}

// Two processes and two Logs of this process append to one shared log at
// once, through many rotations: every record is there once, whole, each
// writer's in order, each rotated file exactly max_size.
func TestSharedWritersKeepEveryRecord(t *testing.T) {
	const maxSize, maxFiles, n = 4096, 400, 800
	d := testutil.StateDir(t)
	start, _, wait := startWriter(t, d, "w-0", "child", 0, n, maxSize, maxFiles)
	ls := []*Log{
		New(d, "w-0", Options{MaxSize: maxSize, MaxFiles: maxFiles, Writer: true, Shared: true}),
		New(d, "w-0", Options{MaxSize: maxSize, MaxFiles: maxFiles, Shared: true}),
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ls))
	ready := make(chan struct{})
	for i, l := range ls {
		wg.Go(func() {
			<-ready
			errs[i] = writeNumbered(l, "w"+strconv.Itoa(i), 0, n)
			l.CloseFile()
		})
	}
	start()
	close(ready)
	wg.Wait()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkShared(t, d, "w-0", maxSize, maxFiles, map[string]int{"child": n, "w0": n, "w1": n}, true)
}

// With max_files 0 the file rotates (is dropped) at a record boundary,
// never cutting a record whose beginning would be lost with it; with a
// max_files that drops files, the files kept are the newest of the
// stream. This process writes until the other has ended, so that both
// write to the end.
func TestSharedWritersDropTheOldest(t *testing.T) {
	for _, maxFiles := range []int{0, 3} {
		t.Run("max_files="+strconv.Itoa(maxFiles), func(t *testing.T) {
			const maxSize, n = 4096, 600
			d := testutil.StateDir(t)
			start, wrote, wait := startWriter(t, d, "w-0", "child", 0, n, maxSize, maxFiles)
			l := New(d, "w-0", Options{MaxSize: maxSize, MaxFiles: maxFiles, Writer: true, Shared: true})
			start()
			mine := 0
		write:
			for ; ; mine += 5 {
				select {
				case <-wrote:
					break write
				default:
				}
				if err := writeNumbered(l, "w0", mine, 5); err != nil {
					t.Fatal(err)
				}
			}
			l.CloseFile()
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			checkShared(t, d, "w-0", maxSize, maxFiles, map[string]int{"child": n, "w0": mine}, false)
		})
	}
}

// A follower of a shared log sees every record exactly once, across the
// rotations either writer makes, whether its own process wrote them (a
// Flush wakes it) or another did (it finds them on its next look).
func TestFollowSharedLog(t *testing.T) {
	const maxSize, maxFiles, n = 4096, 400, 800
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: maxSize, MaxFiles: maxFiles, Writer: true, Shared: true})
	_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
	defer cur.Close()
	wake := cur.C()
	start, _, wait := startWriter(t, d, "w-0", "child", 0, n, maxSize, maxFiles)
	done := make(chan error, 1)
	go func() {
		err := writeNumbered(l, "w0", 0, n)
		l.CloseFile()
		done <- err
	}()
	start()
	next := map[string]int{}
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(60 * time.Second)
	for next["child"] < n || next["w0"] < n {
		select {
		case <-wake:
		case <-poll.C:
		case <-deadline:
			t.Fatalf("followed %v of %d each", next, n)
		}
		for _, e := range nextAll(t, cur) {
			f := strings.SplitN(string(e.Line), " ", 3)
			seq, _ := strconv.Atoi(f[1])
			if string(e.Line) != sharedLine(f[0], seq) || seq != next[f[0]] {
				t.Fatalf("followed %.60q, want %s's record %d", e.Line, f[0], next[f[0]])
			}
			next[f[0]]++
		}
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lstat(l.name(10)); err != nil {
		t.Fatalf("too few rotations to follow across: %v", err)
	}
}

// Records another process writes wake a follower here once this process
// hears of them (Changed); its first look finds them without that, and
// so does a later one (a second on at most).
func TestChangedWakesFollowers(t *testing.T) {
	d := testutil.StateDir(t)
	l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: 5, Writer: true, Shared: true})
	add(t, l, 0, Tend, "a note of this process")
	_, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{})
	defer cur.Close()
	wake := cur.C()
	child := func(from, n int) {
		t.Helper()
		start, _, wait := startWriter(t, d, "w-0", "child", from, n, 4096, 5)
		start()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	child(0, 10)
	l.Changed()
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed woke no follower")
	}
	got := nextAll(t, cur)
	if len(got) != 10 || string(got[0].Line) != sharedLine("child", 0) {
		t.Fatalf("after Changed: %v", lines(got))
	}
	child(10, 5)
	var later []Entry
	testutil.Eventually(t, "the follower finds the other process's records unannounced", func() bool {
		later = append(later, nextAll(t, cur)...)
		return len(later) >= 5
	}, testutil.Within(20*time.Second))
	if len(later) != 5 || string(later[0].Line) != sharedLine("child", 10) {
		t.Fatalf("unannounced: %v", lines(later))
	}
}

// What a batch costs, single writer and shared: 16 records of 100 bytes
// a Flush, in files of 1 MiB (a rotation every 600 batches or so).
func BenchmarkFlush(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run("shared="+strconv.FormatBool(shared), func(b *testing.B) {
			d := testutil.StateDir(b)
			l := New(d, "w-0", Options{MaxSize: 1 << 20, MaxFiles: 2, Writer: true, Shared: shared})
			defer l.CloseFile()
			line := []byte(strings.Repeat("x", 100))
			b.SetBytes(16 * int64(storedLen(Record{Stream: TTY, Line: line})))
			for b.Loop() {
				for range 16 {
					if err := l.Add(Record{TS: t0, Stream: TTY, Line: line}); err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A writer that dies in the middle of a write leaves a record without its
// newline at the end of the file; the next batch of another writer ends
// it first, so that its own first record is not glued to it: in the
// file, at the end of a full one (the rest goes on in the next file), and
// at the end of a full one that is dropped (max_files 0).
func TestSharedWriterEndsATornRecord(t *testing.T) {
	torn := string(Append(nil, Record{TS: t0, Stream: TTY, Line: []byte("the end of a dead writer")}))
	torn = torn[:len(torn)-5]
	for _, c := range []struct {
		name     string
		before   string
		maxFiles int
	}{
		{"in the file", torn, 2},
		{"at max_size", strings.Repeat("x", 4096-len(torn)-1) + "\n" + torn, 2},
		{"at max_size, max_files 0", strings.Repeat("x", 4096-len(torn)-1) + "\n" + torn, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := testutil.StateDir(t)
			if err := os.WriteFile(d.Join("w-0.log"), []byte(c.before), 0o600); err != nil {
				t.Fatal(err)
			}
			l := New(d, "w-0", Options{MaxSize: 4096, MaxFiles: c.maxFiles, Writer: true, Shared: true})
			for i := range 3 {
				if err := l.Add(Record{TS: t0, Stream: TTY, Line: []byte(sharedLine("w0", i))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			got, cur := read(t, []Source{{ID: "w:0", Log: l}}, Query{Tail: 3})
			cur.Close()
			for i, e := range got {
				if string(e.Line) != sharedLine("w0", i) || e.Partial {
					t.Errorf("record %d: %.80q", i, e.Line)
				}
			}
			if len(got) != 3 {
				t.Errorf("%d records", len(got))
			}
			if b, _ := os.ReadFile(d.Join("w-0.log")); !beginsRecord(b) && c.maxFiles == 0 {
				t.Errorf("the current file begins %.40q", b)
			}
		})
	}
}

// What is planted at a shared log's names, the one its rotation makes
// the next file under included, is never written through nor blocked on.
func TestSharedPlantedNamesAreNotWrittenThrough(t *testing.T) {
	d := testutil.StateDir(t)
	target := d.Join("precious")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w-0.log", "w-0.log.new", "w-0.log.1"} {
		if err := os.Symlink(target, d.Join(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(d.Join("v-0.log.new"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, base := range []string{"w-0", "v-0"} {
			l := New(d, base, Options{MaxSize: 4096, MaxFiles: 2, Shared: true})
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
	for _, base := range []string{"w-0", "v-0"} {
		for _, name := range []string{base + ".log", base + ".log.1", base + ".log.2"} {
			fi, err := os.Lstat(d.Join(name))
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s is %v (%v), want a regular file", name, fi.Mode(), err)
			}
		}
		if _, err := os.Lstat(d.Join(base + ".log.new")); !os.IsNotExist(err) {
			t.Errorf("%s.log.new is left: %v", base, err)
		}
	}
}
