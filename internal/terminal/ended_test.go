package terminal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Ended rebuilds a screen from what a program wrote, with no master: the
// screen reads as a closed terminal's, input and resizing are refused.
func TestEndedRebuildsTheScreen(t *testing.T) {
	at := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	term, err := Ended(Options{Size: vt.Size{Cols: 20, Rows: 3}, Replay: []byte("gone\r\n\x1b[1mlast\x1b[0m words\r\n\x1b[6n> "), ReplayAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := term.Text(); got != "gone\nlast words\n>\n" {
		t.Errorf("screen %q", got)
	}
	if !term.ChangedAt().Equal(at) || !term.Ended() {
		t.Errorf("changed at %v, ended %v", term.ChangedAt(), term.Ended())
	}
	select {
	case <-term.Done():
	default:
		t.Error("Done is not closed")
	}
	if err := term.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("write: %v", err)
	}
	if err := term.Resize(vt.Size{Cols: 30, Rows: 5}); !errors.Is(err, ErrClosed) {
		t.Errorf("resize: %v", err)
	}
	if _, err := term.Dup(); !errors.Is(err, ErrClosed) {
		t.Errorf("dup: %v", err)
	}
	if err := term.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := Ended(Options{Size: vt.Size{Cols: 5, Rows: 1}}); err == nil {
		t.Error("a bad size was taken")
	}
}

// Repaint sends every attached client a fresh redraw in place of what it
// had queued.
func TestRepaintRedrawsEveryClient(t *testing.T) {
	size := vt.Size{Cols: 80, Rows: 10}
	term, _ := startChild(t, "echo", Options{Size: size})
	screenHas(t, term, "ready")
	var cs []*Client
	for range 2 {
		c := NewClient(0)
		term.Attach(c)
		drain(t, c, vt.NewScreen(size), "ready")
		cs = append(cs, c)
	}
	term.Repaint()
	for i, c := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		b, err := c.Next(ctx)
		cancel()
		if err != nil || !strings.HasPrefix(string(b), "\x1b[?2026h") || !strings.Contains(string(b), "ready") {
			t.Errorf("client %d got %q, %v; want a redraw", i, b, err)
		}
		c.Close()
	}
}
