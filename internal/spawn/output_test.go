package spawn

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/epoll"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// These tests run real children through os/exec: no reaper runs in this
// test binary, so Wait is safe here (unlike in the daemon).

type rig struct {
	dir        string
	logs, fifo *statedir.Dir
	c          *Capture
}

func newRig(t *testing.T, o CaptureOptions) *rig {
	t.Helper()
	dir := t.TempDir()
	logs, err := statedir.Open(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := statedir.Open(filepath.Join(dir, "fifo"))
	if err != nil {
		t.Fatal(err)
	}
	o.Logs, o.FIFO = logs, fifo
	r := &rig{dir: dir, logs: logs, fifo: fifo, c: NewCapture(o)}
	t.Cleanup(func() {
		r.c.Close()
		logs.Close()
		fifo.Close()
	})
	return r
}

var smallLogs = program.Logs{MaxSize: 64 << 20, MaxFiles: 2}

// child runs script under sh with its stdout and stderr from o, and stdin
// from the returned writer. It is killed and reaped at cleanup.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

func startChild(t *testing.T, o *Output, script string) *child {
	t.Helper()
	p, err := o.openRun(false)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := o.watchRun(p); err != nil { // as spawn.Start does: never hold the write ends after the fork
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(ch.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-ch.done
	})
	return ch
}

func (ch *child) wait(t *testing.T) {
	t.Helper()
	ch.stdin.Close()
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not end")
	}
}

func readAll(t *testing.T, c *Capture, q logfile.Query, ids ...string) []logfile.Entry {
	t.Helper()
	var srcs []logfile.Source
	for _, id := range ids {
		srcs = append(srcs, logfile.Source{ID: id, Log: c.Log(id)})
	}
	var got []logfile.Entry
	cur, err := logfile.Read(srcs, q, func(e *logfile.Entry) error {
		c := *e
		c.Line = slices.Clone(e.Line)
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cur.Close()
	return got
}

func render(es []logfile.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s %s %s\n", e.ID, e.Stream, e.Line)
	}
	return b.String()
}

// echoer writes each "out LINE" or "err LINE" it reads to that stream.
const echoer = `while read s l; do if [ "$s" = out ]; then echo "$l"; else echo "$l" >&2; fi; done`

// Two instances writing stdout and stderr in turn come back merged in the
// order they wrote, each line with its stream.
func TestInterleavedStreamsOfTwoInstancesMerge(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	a, b := NewOutput(r.c, "a:0", smallLogs), NewOutput(r.c, "b:0", smallLogs)
	ca, cb := startChild(t, a, echoer), startChild(t, b, echoer)
	steps := []struct {
		ch   *child
		id   string
		cmd  string
		want string
	}{
		{ca, "a:0", "out a1", "a:0 stdout a1"},
		{cb, "b:0", "err b1", "b:0 stderr b1"},
		{ca, "a:0", "err a2", "a:0 stderr a2"},
		{ca, "a:0", "out a3", "a:0 stdout a3"},
		{cb, "b:0", "out b2", "b:0 stdout b2"},
		{ca, "a:0", "err a4", "a:0 stderr a4"},
		{cb, "b:0", "err b3", "b:0 stderr b3"},
	}
	var want strings.Builder
	for i, s := range steps {
		if _, err := io.WriteString(s.ch.stdin, s.cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, s.want, func() bool {
			return len(readAll(t, r.c, logfile.Query{Tail: -1}, s.id)) == countFor(steps[:i+1], s.id)
		})
		want.WriteString(s.want + "\n")
		time.Sleep(3 * time.Millisecond) // the next line gets a later millisecond
	}
	got := render(readAll(t, r.c, logfile.Query{Tail: -1}, "a:0", "b:0"))
	if got != want.String() {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want.String())
	}
	if got := render(readAll(t, r.c, logfile.Query{Tail: -1, Stderr: true}, "a:0", "b:0")); got != "b:0 stderr b1\na:0 stderr a2\na:0 stderr a4\nb:0 stderr b3\n" {
		t.Errorf("stderr only:\n%s", got)
	}
	ca.wait(t)
	cb.wait(t)
	a.Close()
	b.Close()
}

func countFor[T any](steps []T, id string) int {
	n := 0
	for _, s := range steps {
		if strings.Contains(fmt.Sprint(s), id) {
			n++
		}
	}
	return n
}

// A line without a newline when the run ends is kept, marked partial; a
// note of tend's own is kept with its stream.
func TestUnfinishedLineAndNotes(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	o := NewOutput(r.c, "w:0", smallLogs)
	o.Note("starting")
	ch := startChild(t, o, `printf 'done\nno newline'`)
	ch.wait(t)
	testutil.Eventually(t, "the end of the stream", func() bool { return len(readAll(t, r.c, logfile.Query{Tail: -1}, "w:0")) == 3 })
	got := readAll(t, r.c, logfile.Query{Tail: -1}, "w:0")
	if render(got) != "w:0 tend starting\nw:0 stdout done\nw:0 stdout no newline\n" || !got[2].Partial || got[1].Partial {
		t.Errorf("got %s %+v", render(got), got)
	}
	if o.LastActivity().IsZero() {
		t.Error("no output activity recorded")
	}
	o.Close()
}

// fds lists this process's descriptors whose target is under dir: in its
// own table and in the epoll loops' (where watched read ends live).
func fds(t *testing.T, dir string) []string {
	t.Helper()
	tables := []string{"/proc/self/fd"}
	if p, err := epoll.Shared(); err == nil {
		for _, l := range p.Stats() {
			if l.Private {
				tables = append(tables, fmt.Sprintf("/proc/self/task/%d/fd", l.TID))
			}
		}
	}
	var out []string
	for _, table := range tables {
		ents, err := os.ReadDir(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if target, err := os.Readlink(table + "/" + e.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
				out = append(out, target)
			}
		}
	}
	return out
}

// A running instance holds its two read ends and nothing else; log files
// are not held per instance (a small pool at most); a stopped one holds
// nothing.
func TestDescriptorsPerInstance(t *testing.T) {
	r := newRig(t, CaptureOptions{OpenFiles: 2, Writers: 1})
	const n = 6
	var outs []*Output
	var kids []*child
	for k := range n {
		o := NewOutput(r.c, program.InstanceID("d", k), smallLogs)
		outs = append(outs, o)
		kids = append(kids, startChild(t, o, `echo hello; echo oops >&2; exec cat`))
	}
	testutil.Eventually(t, "every instance's output on disk", func() bool {
		for k := range n {
			if len(readAll(t, r.c, logfile.Query{Tail: -1}, program.InstanceID("d", k))) != 2 {
				return false
			}
		}
		return true
	})
	fifos, logs := fds(t, filepath.Join(r.dir, "fifo")), fds(t, filepath.Join(r.dir, "logs"))
	if len(fifos) != 2*n {
		t.Errorf("%d running instances hold %d FIFO descriptors, want %d: %v", n, len(fifos), 2*n, fifos)
	}
	if len(logs) > 2 {
		t.Errorf("%d log files held open past the pool of 2: %v", len(logs), logs)
	}
	for k, ch := range kids {
		ch.wait(t)
		outs[k].Close()
	}
	if left := append(fds(t, filepath.Join(r.dir, "fifo")), fds(t, filepath.Join(r.dir, "logs"))...); len(left) != 0 {
		t.Errorf("stopped instances hold %v", left)
	}
	if names, _ := r.fifo.Names(); len(names) != 0 {
		t.Errorf("FIFOs left after Close: %v", names)
	}
}

// A symlink planted where a run's FIFO goes (to a file of root's, say) is
// replaced, never opened through.
func TestPlantedFIFOIsNotWrittenThrough(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	target := filepath.Join(t.TempDir(), "bashrc")
	os.WriteFile(target, []byte("precious\n"), 0o600)
	for _, name := range []string{"w-0.out", "w-0.err"} {
		if err := os.Symlink(target, r.fifo.Join(name)); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOutput(r.c, "w:0", smallLogs)
	ch := startChild(t, o, `echo to stdout; echo to stderr >&2`)
	ch.wait(t)
	testutil.Eventually(t, "both lines", func() bool { return len(readAll(t, r.c, logfile.Query{Tail: -1}, "w:0")) == 2 })
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("written through the symlink: %q", b)
	}
	o.Close()
}

// Forwarded lines are whole: lines of different instances never
// interleave within a line.
func TestForwardWholeLines(t *testing.T) {
	var mu sync.Mutex
	var fwd strings.Builder
	r := newRig(t, CaptureOptions{Forward: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return fwd.Write(p)
	})})
	const lines = 3000
	var outs []*Output
	var kids []*child
	for k := range 3 {
		o := NewOutput(r.c, program.InstanceID("f", k), smallLogs)
		outs = append(outs, o)
		kids = append(kids, startChild(t, o, `i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do echo "line $i of `+strconv.Itoa(k)+` padding padding padding padding"; i=$((i+1)); done`))
	}
	for k, ch := range kids {
		ch.wait(t)
		outs[k].Close()
	}
	mu.Lock()
	defer mu.Unlock()
	next := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(fwd.String()))
	for sc.Scan() {
		id, line, ok := strings.Cut(sc.Text(), " | ")
		want := fmt.Sprintf("line %d of %s padding padding padding padding", next[id], id[2:])
		if !ok || line != want {
			t.Fatalf("forwarded %q, want %q", sc.Text(), id+" | "+want)
		}
		next[id]++
	}
	for k := range 3 {
		if id := program.InstanceID("f", k); next[id] != lines {
			t.Errorf("%s: %d lines forwarded", id, next[id])
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A run that writes faster than its writer can keep up is paused, never
// dropped: it blocks on its full pipe while the writer is held up, the
// daemon's memory for it stays bounded, and the epoll loop meanwhile
// serves another instance's notify socket. Once the writer goes on,
// every line arrives, in order.
func TestBackpressurePausesTheRunAndTheLoopServesOthers(t *testing.T) {
	gate := make(chan struct{})
	r := newRig(t, CaptureOptions{Writers: 1, beforeWrite: func(id string) {
		if id == "fast:0" {
			<-gate
		}
	}})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	o := NewOutput(r.c, "fast:0", program.Logs{MaxSize: 256 << 20, MaxFiles: 1})
	const n = 200000 // about 1.3 MB: far more than the buffers and the pipe hold
	ch := startChild(t, o, "seq 1 "+strconv.Itoa(n))
	testutil.Eventually(t, "the read end to be paused", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.streams) > 0 && o.streams[0].paused
	})

	// The notify socket of another instance, on the same loop.
	sock := filepath.Join(r.dir, "n.sock")
	got := make(chan string, 100)
	ns, err := notify.Listen(sock, func(m notify.Message) {
		if m.Status != nil {
			got <- *m.Status
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	conn, err := net.Dial("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 20 {
		if _, err := fmt.Fprintf(conn, "STATUS=beat %d", i); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			if s != fmt.Sprintf("beat %d", i) {
				t.Fatalf("notify got %q", s)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the epoll loop did not serve the notify socket while an output was held back")
		}
	}

	select {
	case <-ch.done:
		t.Fatal("the run finished while its writer was held up: output went somewhere")
	default:
	}
	if used := r.c.used.Load(); used > 2*pendMax {
		t.Errorf("%d bytes held for one instance, more than two buffers", used)
	}
	if st := procState(ch.cmd.Process.Pid); st != "S" {
		t.Errorf("the held-back run is in state %q, want S (blocked writing)", st)
	}

	close(gate)
	ch.wait(t)
	o.Close()
	all := readAll(t, r.c, logfile.Query{Tail: -1}, "fast:0")
	if len(all) != n {
		t.Fatalf("%d lines stored, want %d", len(all), n)
	}
	for i, e := range all {
		if string(e.Line) != strconv.Itoa(i+1) {
			t.Fatalf("line %d is %q", i, e.Line)
		}
	}
}

// procState is the state letter of pid from /proc/PID/stat.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// A daemon that goes away leaves the run writing into its FIFOs; the next
// one reopens them (Attach) and reads on, both streams.
func TestAttachReadsOnAfterTheDaemon(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	o1 := NewOutput(r.c, "w:0", smallLogs)
	ch := startChild(t, o1, echoer)
	io.WriteString(ch.stdin, "out before\n")
	testutil.Eventually(t, "the first line", func() bool { return len(readAll(t, r.c, logfile.Query{Tail: -1}, "w:0")) == 1 })
	// The daemon dies: its read ends close, nothing else happens.
	o1.mu.Lock()
	sts := o1.streams
	o1.mu.Unlock()
	for _, st := range sts {
		st.w.Close()
	}
	io.WriteString(ch.stdin, "out while away\nerr also away\n")
	time.Sleep(50 * time.Millisecond)

	r2 := newRig(t, CaptureOptions{})
	r2.c.opts.Logs, r2.c.opts.FIFO = r.logs, r.fifo
	o2 := NewOutput(r2.c, "w:0", smallLogs)
	if err := o2.Attach(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(ch.stdin, "err after\n")
	ch.wait(t)
	testutil.Eventually(t, "every line", func() bool { return len(readAll(t, r2.c, logfile.Query{Tail: -1}, "w:0")) == 4 })
	got := render(readAll(t, r2.c, logfile.Query{Tail: -1}, "w:0"))
	if got != "w:0 stdout before\nw:0 stdout while away\nw:0 stderr also away\nw:0 stderr after\n" {
		t.Errorf("got:\n%s", got)
	}
	o2.Close()
	_ = syscall.Getpid
}

// Once a run's two streams have ended, StreamEnds says so, and every line
// they carried is in the log: a reader may take it as complete.
func TestStreamEndsCountWrittenEnds(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	o := NewOutput(r.c, "w:0", smallLogs)
	if n, ok := r.c.StreamEnds("w:0"); !ok || n != 0 {
		t.Fatalf("before a run: %d, %v", n, ok)
	}
	ch := startChild(t, o, `i=0; while [ $i -lt 200 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; echo last`)
	ch.wait(t)
	testutil.Eventually(t, "both streams to end", func() bool {
		n, _ := r.c.StreamEnds("w:0")
		return n == 2
	})
	got := readAll(t, r.c, logfile.Query{Tail: -1}, "w:0")
	var outs []string
	for _, e := range got {
		if e.Stream == logfile.Stdout {
			outs = append(outs, string(e.Line))
		}
	}
	if len(got) != 401 || len(outs) != 201 || outs[200] != "last" {
		t.Errorf("the log has %d lines, %d of stdout, once the ends are counted; want 401, 201 ending with last", len(got), len(outs))
	}
	o.Close()
	if _, ok := r.c.StreamEnds("w:0"); ok {
		t.Error("a closed output still counts")
	}
}

// The read ends are watched only after the fork: what a run wrote before
// then, even if it has ended already, waits in the pipe and is all in the
// log, its streams' ends counted; through a FIFO and through a plain pipe.
func TestRunEndedBeforeItsPipesAreWatched(t *testing.T) {
	for _, fifo := range []bool{true, false} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			r := newRig(t, CaptureOptions{})
			if !fifo {
				r.c.opts.FIFO = nil
			}
			o := NewOutput(r.c, "early:0", smallLogs)
			t.Cleanup(func() { o.Close() })
			p, err := o.openRun(false)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`)
			cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
			if err := cmd.Run(); err != nil { // over before anything reads
				t.Fatal(err)
			}
			if err := o.watchRun(p); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, "both streams to end", func() bool {
				n, _ := r.c.StreamEnds("early:0")
				return n == 2
			})
			if got := readAll(t, r.c, logfile.Query{Tail: -1}, "early:0"); len(got) != 600 {
				t.Errorf("the log has %d lines, want 600", len(got))
			}
		})
	}
}

// A read end that cannot be watched is an error, and the write ends are
// closed all the same.
func TestWatchRunError(t *testing.T) {
	r := newRig(t, CaptureOptions{})
	o := NewOutput(r.c, "bad:0", smallLogs)
	t.Cleanup(func() { o.Close() })
	p, err := o.openRun(false)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(p.reads[0].fd)
	p.reads[0].fd = 1 << 20 // no such descriptor
	if err := o.watchRun(p); err == nil {
		t.Error("watchRun of a read end that is not there succeeded")
	}
	if _, err := p.stdout.Write([]byte("x")); err == nil {
		t.Error("the write end is still open")
	}
}
