package supervisor

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// ttySpec is a tty program of size 60x8 running shell under sh.
func ttySpec(name, shell string) program.Spec {
	s := spec(name, "/bin/sh", "-c", shell)
	s.Tty, s.TtyCols, s.TtyRows = true, 60, 8
	return s
}

// ttyOf returns instance id's terminal side.
func (h *harness) ttyOf(id string) *terminal.Session {
	h.t.Helper()
	_, ttys, err := h.mgr.TTYs(id)
	if err != nil || len(ttys) != 1 || ttys[0] == nil {
		h.t.Fatalf("TTYs(%s) = %v, %v", id, ttys, err)
	}
	return ttys[0]
}

// screenOf is id's screen as text, one line per row.
func (h *harness) screenOf(id string) string {
	h.t.Helper()
	s, err := h.ttyOf(id).Screen(false, 0)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.Join(s.Lines, "\n")
}

// A tty run has the terminal as its controlling terminal, TERM and the
// size; its screen shows what it wrote, input reaches it, the log keeps
// the bytes, and the status carries the tty object.
func TestTTYRunScreenInputLog(t *testing.T) {
	h := newHarness(t)
	if _, err := h.mgr.Add(ttySpec("t", `echo "term=$TERM size=$(stty size)"; tty >/dev/null && echo has-tty; while read l; do echo "got $l"; done`)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the screen", func() bool { return strings.Contains(h.screenOf("t:0"), "has-tty") })
	if s := h.screenOf("t:0"); !strings.Contains(s, "term=xterm-256color size=8 60") {
		t.Errorf("screen:\n%s", s)
	}
	tty := h.ttyOf("t:0")
	if err := tty.Send(program.Input{Text: "hello", Enter: true}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the answer", func() bool { return strings.Contains(h.screenOf("t:0"), "got hello") })
	if err := tty.Send(program.Input{Text: strings.Repeat("x", program.MaxInput+1)}); !errors.Is(err, program.ErrTooLarge) {
		t.Errorf("too much text: %v", err)
	}
	// The cap is on text and keys together, checked here alone: the
	// terminal below does not check it again.
	if err := tty.Send(program.Input{Text: "x", Keys: []string{strings.Repeat("k", program.MaxInput)}}); !errors.Is(err, program.ErrTooLarge) {
		t.Errorf("too much text and keys: %v", err)
	}
	h.waitFor("the log", func() bool { return strings.Contains(h.output("t:0"), "got hello\r") })
	snap := h.snapshot("t:0")
	st := snap.TTY()
	if st.Cols != 60 || st.Rows != 8 || st.Clients != 0 || st.ScreenChangedAt.IsZero() {
		t.Errorf("status tty %+v", st)
	}
}

// A client attached to a tty instance sees the screen at once, then the
// output; when the run ends, the one-line notice and then the next run's
// screen; when the instance comes to rest, the end, with how it ended.
// The last screen stays readable.
func TestTTYAttachFollowsTheInstance(t *testing.T) {
	h := newHarness(t)
	s := ttySpec("f", `echo "run $$"; read x; exit 1`)
	s.BackoffInitial, s.BackoffMax, s.MaxCrashes = 200*time.Millisecond, 200*time.Millisecond, 5
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the first run", func() bool { return strings.Contains(h.screenOf("f:0"), "run ") })
	tty := h.ttyOf("f:0")
	a, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := h.snapshot("f:0").TTY().Clients; got != 1 {
		t.Errorf("clients %d", got)
	}
	c := newCollector(a)
	first := h.screenOf("f:0")
	c.waitFor(t, "the redraw", func(s string) bool { return strings.Contains(s, strings.TrimSpace(first)) })
	if err := a.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "the notice", func(s string) bool {
		return strings.Contains(s, "[tend] f:0 exited: exit 1 (runtime_error), crash 1 of 5; next run in ")
	})
	h.waitFor("the second run", func() bool { return len(h.matching(program.KindSpawned, "f:0")) == 2 })
	h.waitFor("its screen", func() bool { s := h.screenOf("f:0"); return strings.Contains(s, "run ") && s != first })
	second := strings.TrimSpace(h.screenOf("f:0"))
	c.waitFor(t, "the next run's screen", func(s string) bool {
		i := strings.Index(s, "[tend] f:0 exited")
		return i >= 0 && strings.Contains(s[i:], second)
	})
	if _, err := h.mgr.Stop(context.Background(), "f:0", program.ActOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if !c.ended(t) {
		t.Fatal("the client was not let go when the instance stopped")
	}
	if a.End() != program.LifecycleDone {
		t.Errorf("end %q", a.End())
	}
	scr, err := tty.Screen(true, 0)
	if err != nil || scr.Running || !strings.Contains(strings.Join(scr.Lines, "\n"), second) || len(scr.ANSI) != 8 {
		t.Errorf("the ended run's screen: %+v, %v", scr, err)
	}
	if _, err := tty.Attach(true); !errors.Is(err, program.ErrNotRunning) {
		t.Errorf("attach to a stopped instance: %v", err)
	}
	if err := tty.Send(program.Input{Text: "x"}); !errors.Is(err, program.ErrNotRunning) {
		t.Errorf("send to a stopped instance: %v", err)
	}
}

// A client of an instance that gives up ends with "error".
func TestTTYAttachEndsInError(t *testing.T) {
	h := newHarness(t)
	s := ttySpec("g", `read x; exit 7`)
	s.FatalExitCodes = []int{7}
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run", func() bool { return h.status("g:0").State == program.StateRunning })
	tty := h.ttyOf("g:0")
	a, err := tty.Attach(true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Write([]byte("x")); !errors.Is(err, terminal.ErrReadOnly) {
		t.Errorf("read-only write: %v", err)
	}
	c := newCollector(a)
	if err := tty.Send(program.Input{Enter: true}); err != nil {
		t.Fatal(err)
	}
	if !c.ended(t) {
		t.Fatal("no end")
	}
	if a.End() != program.LifecycleError {
		t.Errorf("end %q", a.End())
	}
	if !strings.Contains(c.text(), "[tend] g:0 exited: exit 7 (unknown); gave up") {
		t.Errorf("client saw %q", c.text())
	}
}

// A tty agent is in a turn while its screen changes, and idle once it has
// not for turn_idle_after: a spinner is a turn, a prompt waiting is not,
// and a cursor that only blinks is no change.
func TestTTYAgentTurnFromTheScreen(t *testing.T) {
	h := newHarness(t)
	for name, shell := range map[string]string{
		"spinner": `while :; do for c in / - '\' '|'; do printf '\r%s working' "$c"; sleep 0.05; done; done`,
		"prompt":  `printf '> '; exec sleep 1000`,
		"blink":   `printf '> '; while :; do printf '\033[?25l'; sleep 0.05; printf '\033[?25h'; sleep 0.05; done`,
	} {
		s := ttySpec(name, shell)
		s.Agent, s.TurnIdleAfter = true, 500*time.Millisecond
		if _, err := h.mgr.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	turn := func(id string) bool {
		snap := h.snapshot(id)
		return snap.Status.PID != nil && program.TurnActive(snap.Turn, snap.LastOutput(), 500*time.Millisecond, time.Now())
	}
	h.waitFor("the prompts drawn", func() bool {
		return strings.Contains(h.screenOf("prompt:0"), ">") && strings.Contains(h.screenOf("blink:0"), ">")
	})
	h.waitFor("the prompt and the blinking cursor to be idle", func() bool { return !turn("prompt:0") && !turn("blink:0") })
	for range 20 {
		if !turn("spinner:0") {
			t.Fatalf("the spinner is idle; screen changed at %v", h.snapshot("spinner:0").LastOutput())
		}
		if turn("blink:0") {
			t.Fatal("a blinking cursor made a turn")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The size a client sets is the terminal's, for this run and the next.
func TestTTYResize(t *testing.T) {
	h := newHarness(t)
	if _, err := h.mgr.Add(ttySpec("r", `trap 'echo "size $(stty size)"' WINCH; echo start; while :; do sleep 0.05; done`)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run", func() bool { return strings.Contains(h.screenOf("r:0"), "start") })
	tty := h.ttyOf("r:0")
	a, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Resize(0, 0); err != nil {
		t.Errorf("0x0: %v", err)
	}
	if err := a.Resize(5, 5); !errors.Is(err, program.ErrInvalid) {
		t.Errorf("5x5: %v", err)
	}
	if err := a.Resize(70, 10); err != nil {
		t.Fatal(err)
	}
	h.waitFor("SIGWINCH", func() bool { return strings.Contains(h.screenOf("r:0"), "size 10 70") })
	if st := h.snapshot("r:0").TTY(); st.Cols != 70 || st.Rows != 10 {
		t.Errorf("status %+v", st)
	}
}

// collector reads an attached client on its own goroutine.
type collector struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{}
	err  error
}

func newCollector(a program.Attach) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			b, err := a.Next(context.Background())
			c.mu.Lock()
			c.buf = append(c.buf, b...)
			c.err = err
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return c
}

// text is what the client got, through a screen of its own: the redraws
// and the output make the same screen there, and notices are lines.
func (c *collector) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := vt.NewScreen(vt.Size{Cols: 200, Rows: 100})
	s.Feed(c.buf)
	return s.Text() + string(c.buf)
}

func (c *collector) waitFor(t *testing.T, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond(c.text()) {
		if time.Now().After(deadline) {
			t.Fatalf("the client never saw %s; it got %q", what, c.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ended waits for the client's Next to return io.EOF.
func (c *collector) ended(t *testing.T) bool {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Is(c.err, io.EOF)
}
