package vt

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// History and reflow against tmux: the same bytes in a tmux pane with the
// same history-limit, the same resizes, then capture-pane -p -S -N beside
// our History(N) and Lines().

// feedPane shows data in a new pane as replay does and waits for it.
func (m *tmuxServer) feedPane(name string, size Size, data []byte) {
	m.t.Helper()
	m.replay(name, size, data)
}

func compareCapture(t *testing.T, m *tmuxServer, name string, s *Screen, n int) {
	t.Helper()
	var d string
	for range 5 {
		want, wx, wy := m.CaptureAll(name, n)
		d = diffScreens(want, testutil.CaptureOf(s, n))
		if x, y := s.Cursor(); d == "" && (x != wx || y != wy) {
			d = fmt.Sprintf("cursor at %d,%d, tmux has %d,%d", x, y, wx, wy)
		}
		if d == "" {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Errorf("%s: capture -S -%d differs from tmux:\n%s", name, n, d)
}

// logLines is a build log of n lines of varied lengths, some wider than
// 120 columns, in colour, with wide characters: the history's typical
// content.
func logLines(n int) []byte {
	var b strings.Builder
	for i := range n {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "\x1b[32m[%05d]\x1b[0m compiling package %d\r\n", i, i)
		case 1:
			fmt.Fprintf(&b, "line %d %s end\r\n", i, strings.Repeat("long ", 30+i%20))
		case 2:
			fmt.Fprintf(&b, "中文 %d 日本語テキスト %s\r\n", i, strings.Repeat("字", 50+i%17))
		case 3:
			b.WriteString("\r\n")
		default:
			fmt.Fprintf(&b, "\x1b[1;33mwarning\x1b[0m: %d unused variable x%d\ttab\r\n", i, i*7)
		}
	}
	return []byte(b.String())
}

func TestHistoryMatchesTmux(t *testing.T) {
	m := newTmux(t)
	m.SetHistoryLimit(2000)
	size := Size{Cols: 120, Rows: 40}
	data := append(logLines(2600), "prompt$ "...)
	s := NewScreen(size)
	s.SetHistory(2000)
	s.Feed(data)
	m.feedPane("h", size, data)
	if s.HistoryLen() < 1800 {
		t.Fatalf("%d lines of history", s.HistoryLen())
	}
	compareCapture(t, m, "h", s, 2000)
	compareCapture(t, m, "h", s, 50)

	// A clear (ED 2) scrolls the screen into the history, as tmux's
	// scroll-on-clear does, and ED 3 clears the history.
	more := []byte("a\r\nb\r\n\x1b[2J\x1b[Hafter the clear\r\n")
	s.Feed(more)
	m.feedPane("h2", size, append(append([]byte{}, data...), more...))
	compareCapture(t, m, "h2", s, 2000)
	s.Feed([]byte("\x1b[3J"))
	if n := s.HistoryLen(); n != 0 {
		t.Fatalf("ED 3 left %d lines", n)
	}
}

func TestReflowMatchesTmux(t *testing.T) {
	m := newTmux(t)
	m.SetHistoryLimit(2000)
	cases := []struct {
		name  string
		size  Size
		data  string
		sizes []Size
	}{
		{"log", Size{120, 40}, string(logLines(300)) + "tail $ ", []Size{{60, 40}, {120, 40}}},
		{"log-rows", Size{120, 40}, string(logLines(300)) + "tail $ ", []Size{{60, 20}, {120, 40}, {90, 50}}},
		{"few", Size{120, 40}, "one\r\n" + strings.Repeat("w", 250) + "\r\nthree", []Size{{60, 40}, {120, 40}, {37, 40}, {120, 40}}},
		{"cursor-mid", Size{40, 10}, strings.Repeat("abcdefghij", 9) + "\x1b[1;5H", []Size{{25, 10}, {40, 10}}},
		{"wide-edge", Size{40, 10}, strings.Repeat("中", 30) + "\r\n" + "x" + strings.Repeat("文", 25), []Size{{25, 10}, {31, 10}, {40, 10}}},
		{"pending-wrap", Size{40, 10}, "a\r\n" + strings.Repeat("z", 40), []Size{{30, 10}, {40, 10}, {50, 10}}},
		{"shrink-rows", Size{40, 10}, "1\r\n2\r\n3\r\n4\r\n5\r\n6\x1b[3;1H", []Size{{40, 4}, {40, 10}, {40, 3}, {40, 12}}},
		{"alt-while-resized", Size{40, 10}, "main " + strings.Repeat("m", 60) + "\x1b[?1049h\x1b[Halt", []Size{{20, 10}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "r" + strconv.Itoa(i)
			s := NewScreen(tc.size)
			s.SetHistory(2000)
			s.Feed([]byte(tc.data))
			m.feedPane(name, tc.size, []byte(tc.data))
			for _, sz := range tc.sizes {
				s.Resize(sz)
				m.ResizePane(name, sz.Cols, sz.Rows)
				compareCapture(t, m, name, s, 2000)
			}
		})
	}
}

// step is bytes written, then a resize (none when Size is zero).
type hstep struct {
	data string
	size Size
}

// steps runs the steps in a new tmux pane and in s, comparing the
// captures after each.
func (m *tmuxServer) steps(name string, size Size, s *Screen, steps []hstep) {
	t := m.t
	t.Helper()
	dir := t.TempDir()
	var script strings.Builder
	script.WriteString("stty raw -echo; ")
	for i, st := range steps {
		f := filepath.Join(dir, fmt.Sprintf("data%d", i))
		if err := os.WriteFile(f, []byte(st.data), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "cat %s; touch %s/done%d; while [ ! -e %s/go%d ]; do sleep 0.02; done; ", f, dir, i, dir, i)
	}
	script.WriteString("exec sleep 3600")
	m.start(name, size, script.String())
	for i, st := range steps {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("done%d", i))); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pane %s: step %d never done", name, i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.Feed([]byte(st.data))
		m.Stable(name, func(string) bool { return true })
		if st.size != (Size{}) {
			s.Resize(st.size)
			m.ResizePane(name, st.size.Cols, st.size.Rows)
		}
		compareCapture(t, m, name, s, 2000)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("go%d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAltScreenLeftAfterResize: the main screen, kept at its size while
// the alternate one is shown, reflows when it is shown again.
func TestAltScreenLeftAfterResize(t *testing.T) {
	m := newTmux(t)
	m.SetHistoryLimit(2000)
	size := Size{40, 10}
	s := NewScreen(size)
	s.SetHistory(2000)
	m.steps("a", size, s, []hstep{
		{"main " + strings.Repeat("m", 60) + "\r\nsecond\x1b[?1049h\x1b[Halt", Size{20, 10}},
		{"\x1b[?1049lback", Size{}},
		{"\r\nmore", Size{50, 6}},
		{"\x1b[?1049h\x1b[Halt2", Size{40, 12}},
		{"\x1b[?1049l!", Size{}},
	})
}

// TestTabStopsAfterResize: a new width puts the tab stops back every eight
// columns, as tmux does; a new height keeps them.
func TestTabStopsAfterResize(t *testing.T) {
	m := newTmux(t)
	size := Size{40, 10}
	s := NewScreen(size)
	m.steps("t", size, s, []hstep{
		{"\x1b[3g\x1b[1;5H\x1bH\x1b[1;12H\x1bH\r\tA\tB", Size{40, 12}},
		{"\r\n\tC\tD", Size{30, 12}},
		{"\r\n\tE\tF", Size{}},
	})
}

// TestStressWithHistoryMatchesTmux replays the emulator's stress cases
// with history kept on both sides (tmux keeps 2,000 lines by default):
// screens, histories and cursors agree.
func TestStressWithHistoryMatchesTmux(t *testing.T) {
	m := newTmux(t)
	size := Size{Cols: 40, Rows: 10}
	extra := []struct{ name, data string }{
		{"el-at-home", "abc\r\ndef\x1b[H\x1b[K"},
		{"ed0-at-home", "abc\r\ndef\x1b[H\x1b[J"},
		{"ed0-not-home", "abc\r\ndef\x1b[1;2H\x1b[J"},
		{"ed2-twice", "one\r\ntwo\x1b[2J\x1b[2J\x1b[Hthree"},
		{"ris", "one\r\ntwo\x1bcthree"},
		{"ed3", strings.Repeat("line\r\n", 30) + "\x1b[3Jend"},
		{"su-region", "1\r\n2\r\n3\r\n4\x1b[2;3r\x1b[2S\x1b[r"},
	}
	for _, tc := range stress {
		extra = append(extra, struct{ name, data string }{tc.name, tc.data})
	}
	for i, tc := range extra {
		t.Run(tc.name, func(t *testing.T) {
			name := "sh" + strconv.Itoa(i)
			s := NewScreen(size)
			s.SetHistory(2000)
			s.Feed([]byte(tc.data))
			m.feedPane(name, size, []byte(tc.data))
			compareCapture(t, m, name, s, 2000)
		})
	}
}
