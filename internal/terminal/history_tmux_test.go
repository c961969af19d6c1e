package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// History and reflow against tmux: the same bytes in a tmux pane with the
// same history-limit, the same resizes, then capture-pane -p -S -N beside
// our History(N) and Lines().

// setHistoryLimit sets the history-limit of panes made from now on. tmux
// reads it when a pane is made, and a server without a session exits, so
// a session that only sleeps holds the server.
func (m *tmuxServer) setHistoryLimit(n int) {
	m.t.Helper()
	if _, err := m.cmd("has-session", "-t", "hold"); err != nil {
		m.must("new-session", "-d", "-s", "hold", "-x", "20", "-y", "5", "exec sleep 3600")
	}
	m.must("set-option", "-g", "history-limit", strconv.Itoa(n))
}

// feedPane shows data in a new pane as replay does and waits for it.
func (m *tmuxServer) feedPane(name string, size Size, data []byte) {
	m.t.Helper()
	m.replay(name, size, data)
}

// captureAll is capture-pane -p -S -n and the cursor.
func (m *tmuxServer) captureAll(name string, n int) (string, int, int) {
	m.t.Helper()
	out := m.must("capture-pane", "-p", "-t", name, "-S", strconv.Itoa(-n))
	x, y := m.cursor(name)
	return out, x, y
}

// ourCapture is what capture-pane -p -S -n prints, from s.
func ourCapture(s *Screen, n int) string {
	var b strings.Builder
	for _, l := range s.History(n, false) {
		b.WriteString(l + "\n")
	}
	b.WriteString(s.Text())
	return b.String()
}

func compareCapture(t *testing.T, m *tmuxServer, name string, s *Screen, n int) {
	t.Helper()
	var d string
	for range 5 {
		want, wx, wy := m.captureAll(name, n)
		d = diffScreens(want, ourCapture(s, n))
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

// resizePane resizes the pane's window to size and waits until tmux has
// done it.
func (m *tmuxServer) resizePane(name string, size Size) {
	m.t.Helper()
	m.must("resize-window", "-t", name, "-x", strconv.Itoa(size.Cols), "-y", strconv.Itoa(size.Rows))
	deadline := time.Now().Add(10 * time.Second)
	want := strconv.Itoa(size.Cols) + "x" + strconv.Itoa(size.Rows)
	for {
		got := strings.TrimSpace(m.must("display-message", "-p", "-t", name, "#{pane_width}x#{pane_height}"))
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("pane %s is %s, want %s", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	m.setHistoryLimit(2000)
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
	m.setHistoryLimit(2000)
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
				m.resizePane(name, sz)
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
		for !fileExists(filepath.Join(dir, fmt.Sprintf("done%d", i))) {
			if time.Now().After(deadline) {
				t.Fatalf("pane %s: step %d never done", name, i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.Feed([]byte(st.data))
		m.stable(name, func(string) bool { return true })
		if st.size != (Size{}) {
			s.Resize(st.size)
			m.resizePane(name, st.size)
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
	m.setHistoryLimit(2000)
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

// TestHistoryOfAProgramMatchesTmux: a real program scrolls 2,600 lines
// through our Terminal (tty_history 2000) and through a tmux pane
// (history-limit 2000, tmux's default); capture-pane -S -2000 and ours
// agree, and again after both are narrowed and widened.
func TestHistoryOfAProgramMatchesTmux(t *testing.T) {
	size := Size{Cols: 80, Rows: 24}
	m := newTmux(t)
	m.setHistoryLimit(2000)
	sh := lookPath(t, "sh")
	r := startRun(t, size, sh)
	r.term.View(func(s *Screen) { s.SetHistory(2000) }) // before anything scrolls: sh has drawn a prompt at most
	var line []string
	for _, kv := range programEnv() {
		line = append(line, shellQuote(kv))
	}
	m.start("live", size, "cd "+shellQuote(r.cmd.Dir)+" && exec env -i "+strings.Join(line, " ")+" "+shellQuote(sh))
	m.stable("live", contains("$"))
	r.settle(contains("$"))
	cmd := `i=1; while [ $i -le 2600 ]; do echo "line $i of a program's output"; i=$((i+1)); done; echo done`
	m.must("send-keys", "-t", "live", "-l", cmd)
	m.must("send-keys", "-t", "live", "Enter")
	if err := r.term.Send(Input{Text: cmd, Keys: []string{"Enter"}}); err != nil {
		t.Fatal(err)
	}
	compare := func(what string) {
		t.Helper()
		var d string
		for range 10 {
			m.stable("live", contains("done\n$"))
			r.settle(contains("done\n$"))
			want, wx, wy := m.captureAll("live", 2000)
			var ours string
			var x, y int
			r.term.View(func(s *Screen) { ours, x, y = ourCapture(s, 2000), s.x, s.y })
			if d = diffScreens(want, ours); d == "" && x == wx && y == wy {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: capture -S -2000 differs from tmux:\n%s", what, d)
	}
	compare("after 2,600 lines")
	for _, sz := range []Size{{40, 24}, {80, 24}, {120, 30}} {
		m.resizePane("live", sz)
		if err := r.term.Resize(sz); err != nil {
			t.Fatal(err)
		}
		compare("at " + sz.String())
	}
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
