package spawn

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// startTTYChild runs script under sh in a new terminal whose reads go to o,
// as the supervisor sets a tty run up.
func startTTYChild(t *testing.T, o *Output, script string) (*terminal.Terminal, *child) {
	t.Helper()
	ctl := &testCtl{} // as the supervisor does: the terminal reads from its start
	term, slave, err := terminal.Open(terminal.Options{Size: vt.Size{Cols: 40, Rows: 5}, Output: o.TTYOutput(ctl)})
	if err != nil {
		t.Fatal(err)
	}
	ctl.t.Store(term)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = terminal.SysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	ch := &child{cmd: cmd, stdin: nopCloser{}, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(ch.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-ch.done
		term.Close()
	})
	return term, ch
}

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

// What a run writes to its terminal is stored byte for byte (the pty turns
// its newlines into CR LF, as a terminal does), a prompt without a newline
// included, and forwarded as text lines; it counts as output.
func TestTTYOutputKeepsTheBytes(t *testing.T) {
	var mu sync.Mutex
	var fwd bytes.Buffer
	r := newRig(t, CaptureOptions{Forward: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return fwd.Write(p)
	})})
	o := NewOutput(r.c, "t:0", smallLogs)
	term, ch := startTTYChild(t, o, `printf '\033[1mbold\033[0m line\n50%%\r100%%\n> '; sleep 0.3`)
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not end")
	}
	term.Close()
	o.EndTTY()
	testutil.Eventually(t, "the terminal's end counted as both streams", func() bool {
		n, ok := r.c.StreamEnds("t:0")
		return ok && n == 2
	})
	o.Close()
	want := "\x1b[1mbold\x1b[0m line\r\n50%\r100%\r\n> "
	testutil.Eventually(t, "the log to hold every byte", func() bool {
		return string(raw(readAll(t, r.c, logfile.Query{Tail: -1}, "t:0"))) == want
	})
	es := readAll(t, r.c, logfile.Query{Tail: -1}, "t:0")
	if last := es[len(es)-1]; !last.Partial || string(last.Line) != "> " {
		t.Errorf("the prompt is stored as %+v", last)
	}
	if o.LastActivity().IsZero() {
		t.Error("terminal output did not count as output")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fwd.String(); got != "t:0 | bold line\nt:0 | 100%\nt:0 | > \n" {
		t.Errorf("forwarded %q", got)
	}
	tail, at := o.TTYTail(time.Time{}, 1<<20)
	if string(tail) != want || at.IsZero() {
		t.Errorf("TTYTail = %q at %v", tail, at)
	}
	if tail, _ := o.TTYTail(time.Time{}, 4); string(tail) != "\r\n> " {
		t.Errorf("TTYTail of 4 bytes = %q", tail)
	}
}

// A terminal whose writer is held back stops being read (the run blocks),
// and every byte arrives once the writer goes on.
func TestTTYBackpressure(t *testing.T) {
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
	const n = 100000
	term, ch := startTTYChild(t, o, "seq 1 "+strconv.Itoa(n)+"; sleep 0.3")
	testutil.Eventually(t, "the terminal to be paused", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.tty != nil && o.tty.paused
	})
	time.Sleep(100 * time.Millisecond)
	select {
	case <-ch.done:
		t.Fatal("the run finished while its writer was held up")
	default:
	}
	if st := procState(ch.cmd.Process.Pid); st != "S" {
		t.Errorf("the held-back run is in state %q, want S", st)
	}
	close(gate)
	select {
	case <-ch.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end")
	}
	term.Close()
	o.Close()
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i) + "\r\n")
	}
	got := raw(readAll(t, r.c, logfile.Query{Tail: -1}, "fast:0"))
	if string(got) != want.String() {
		t.Fatalf("%d bytes stored, want %d", len(got), want.Len())
	}
}

type testCtl struct {
	t atomic.Pointer[terminal.Terminal]
}

func (c *testCtl) Pause() error {
	if t := c.t.Load(); t != nil {
		return t.Pause()
	}
	return nil
}

func (c *testCtl) Resume() {
	if t := c.t.Load(); t != nil {
		t.Resume()
	}
}

type nopCloser struct{}

func (nopCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopCloser) Close() error                { return nil }
