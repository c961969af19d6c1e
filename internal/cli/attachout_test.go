package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// redrawOf is the daemon's redraw of a screen fed p.
func redrawOf(p string) []byte {
	s := vt.NewScreen(vt.Size{Cols: 40, Rows: 10})
	s.Feed([]byte(p))
	return s.Redraw(nil)
}

// TestScreenOutAlternate: on the caller's alternate screen the run's own
// switches between its screens are taken out, even cut between two
// messages or beside other modes, and the screen switched to is painted.
func TestScreenOutAlternate(t *testing.T) {
	var w bytes.Buffer
	o := newScreenOut(parts.Screen, &w, false, 40, 10)
	o.Write(redrawOf("shell$ "))
	o.Write([]byte("vim\r\n\x1b[?10"))
	o.Write([]byte("49h\x1b[Hin vim"))
	o.Write([]byte("\x1b[?1049;1l\x1b[?2004h"))
	got := w.String()
	if strings.Contains(got, "\x1b[?1049") || strings.Contains(got, "\x1b[?47") || strings.Contains(got, "\x1b[?1047") {
		t.Errorf("a screen switch went through: %q", got)
	}
	if !strings.Contains(got, "\x1b[?1l") || !strings.Contains(got, "\x1b[?2004h") {
		t.Errorf("the other modes did not go through: %q", got)
	}
	// What the caller sees, on the screen it was given: the main screen
	// again, as the run left it.
	caller := vt.NewScreen(vt.Size{Cols: 40, Rows: 10})
	caller.Feed(w.Bytes())
	if text := caller.Text(); !strings.Contains(text, "shell$ vim") || strings.Contains(text, "in vim") || caller.AltScreen() {
		t.Errorf("the caller's screen shows:\n%s", text)
	}
	leave := string(o.leave())
	if !strings.HasPrefix(leave, resetModes) || !strings.HasSuffix(leave, "\x1b[?1049l") || strings.Contains(leave, "1007") {
		t.Errorf("leave = %q", leave)
	}
	o.Write([]byte("\x1b[?1007h"))
	if leave := string(o.leave()); !strings.Contains(leave, "\x1b[?1007l") {
		t.Errorf("alternate scroll turned on and not off: %q", leave)
	}
}

// TestScreenOutInline: inline, the first redraw is printed as lines where
// the cursor is, nothing cleared; later redraws are not printed; the run's
// bytes go through as they are.
func TestScreenOutInline(t *testing.T) {
	var w bytes.Buffer
	o := newScreenOut(parts.Screen, &w, true, 40, 10)
	o.Write(append(redrawOf("hello\r\nworld\r\n\r\n$ "), "typed"...))
	o.Write(append(append([]byte("more\r\n"), redrawOf("other")...), "after"...))
	got := w.String()
	if strings.Contains(got, "\x1b[2J") || strings.Contains(got, "\x1b[?1049") || strings.Contains(got, "other") {
		t.Errorf("inline output cleared or redrew: %q", got)
	}
	caller := vt.NewScreen(vt.Size{Cols: 40, Rows: 10})
	caller.Feed([]byte("$ tend run -a --tty\r\n"))
	caller.Feed(w.Bytes())
	if want := "$ tend run -a --tty\nhello\nworld\n\n$ typedmore\nafter"; !strings.HasPrefix(caller.Text(), want) {
		t.Errorf("the caller's screen shows\n%s\nwant\n%s", caller.Text(), want)
	}
	if leave := string(o.leave()); leave != resetModes {
		t.Errorf("inline leave = %q", leave)
	}
}
