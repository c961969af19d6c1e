package supervisor

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// sizeShell prints the terminal's size at the start and at every SIGWINCH.
const sizeShell = `trap 'echo "size $(stty size)"' WINCH; echo "size $(stty size)"; while :; do sleep 0.05; done`

// lastSize is the size the program printed last ("ROWS COLS").
func (h *harness) lastSize(id string) string {
	s := h.screenOf(id)
	i := strings.LastIndex(s, "size ")
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(s[i+len("size "):], "\n")
	return strings.TrimSpace(line)
}

// waitSize waits for the program and the screen (the status's tty object)
// to have size cols x rows.
func (h *harness) waitSize(id string, cols, rows int) {
	h.t.Helper()
	want := program.TTY{Cols: cols, Rows: rows}
	wantStty := strings.Join([]string{strconv.Itoa(rows), strconv.Itoa(cols)}, " ")
	h.waitFor(id+" at "+strconv.Itoa(cols)+"x"+strconv.Itoa(rows), func() bool {
		st := h.snapshot(id).TTY() // the screen's size, read when asked for
		return st.Cols == want.Cols && st.Rows == want.Rows && h.lastSize(id) == wantStty
	})
}

// While clients are attached the terminal has the size of the one that
// sized it last; when that one leaves, the latest of the others'; with
// none, tty_size again, for this run and the next. A client that reports
// no size and a read-only one leave the size as it is.
func TestTTYSizeFollowsTheLatestClient(t *testing.T) {
	h := newHarness(t)
	if _, err := h.mgr.Add(ttySpec("w", sizeShell)); err != nil {
		t.Fatal(err)
	}
	h.waitSize("w:0", 60, 8)
	tty := h.ttyOf("w:0")
	a, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Resize(70, 20); err != nil {
		t.Fatal(err)
	}
	h.waitSize("w:0", 70, 20)

	b, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Resize(0, 0); err != nil { // no size: nothing changes
		t.Fatal(err)
	}
	ro, err := tty.Attach(true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Resize(100, 30); err != nil { // a watcher: nothing changes
		t.Fatal(err)
	}
	if err := b.Resize(80, 12); err != nil {
		t.Fatal(err)
	}
	h.waitSize("w:0", 80, 12)
	if err := a.Resize(75, 9); err != nil { // a resizes: the latest again
		t.Fatal(err)
	}
	h.waitSize("w:0", 75, 9)
	a.Close() // the latest leaves: b's size, the latest of those attached
	h.waitSize("w:0", 80, 12)
	b.Close() // the read-only one is left: tty_size
	h.waitSize("w:0", 60, 8)
	ro.Close()

	// The next run has tty_size too.
	if _, err := h.mgr.Restart(context.Background(), "w:0", program.ActOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the second run", func() bool { return len(h.matching(program.KindSpawned, "w:0")) == 2 })
	h.waitSize("w:0", 60, 8)
}

// A resize repaints every attached client: each is sent a fresh screen
// (a redraw, as a client that fell behind gets), not only the one that
// resized.
func TestTTYResizeRepaintsTheClients(t *testing.T) {
	h := newHarness(t)
	if _, err := h.mgr.Add(ttySpec("p", `echo painted; while :; do sleep 0.05; done`)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run", func() bool { return strings.Contains(h.screenOf("p:0"), "painted") })
	tty := h.ttyOf("p:0")
	a, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := tty.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cb := newCollector(b)
	const redraw = "\x1b[?2026h" // how a redraw begins (terminal.Screen.Redraw)
	redraws := func() int {
		cb.mu.Lock()
		defer cb.mu.Unlock()
		return strings.Count(string(cb.buf), redraw)
	}
	cb.waitFor(t, "the first screen", func(s string) bool { return strings.Contains(s, "painted") })
	if n := redraws(); n != 1 {
		t.Fatalf("%d redraws before the resize", n)
	}
	if err := a.Resize(70, 10); err != nil {
		t.Fatal(err)
	}
	h.waitFor("b's repaint", func() bool { return redraws() == 2 })
	cb.waitFor(t, "the screen after the repaint", func(s string) bool {
		cb.mu.Lock()
		last := string(cb.buf[strings.LastIndex(string(cb.buf), redraw):])
		cb.mu.Unlock()
		return strings.Contains(last, "painted")
	})
	// The same size again changes nothing: no repaint.
	if err := a.Resize(70, 10); err != nil {
		t.Fatal(err)
	}
	if n := redraws(); n != 2 {
		t.Errorf("%d redraws after a resize to the same size", n)
	}
}
