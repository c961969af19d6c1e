package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The oracle of the terminal tests (internal/terminal and its emulator,
// internal/terminal/vt): Debian's tmux, a terminal emulator no one here
// wrote. A private server per test (its own socket, no config file) runs
// the same bytes or the same program as our screen, and its capture-pane
// is the reference.

var tmuxSeq atomic.Int64

// Tmux is one test's private tmux server.
type Tmux struct {
	t    *testing.T
	sock string
	dir  string // TMUX_TMPDIR: the socket lives there, and goes with the test
}

// TmuxEnv is the environment of the tmux server and its panes: no user
// config, no outer tmux, a UTF-8 locale, the socket in dir.
func TmuxEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TMUX", "TMUX_PANE", "TMUX_TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm-256color", "HOME=/nonexistent", "TMUX_TMPDIR="+dir)
}

// NewTmux starts nothing yet: the server comes with the first session,
// and is killed (only it, by its socket) when the test ends. It skips the
// test where tmux is not installed (NeedTool).
func NewTmux(t *testing.T) *Tmux {
	t.Helper()
	NeedTool(t, "tmux")
	m := &Tmux{t: t, sock: fmt.Sprintf("tend-test-%d", tmuxSeq.Add(1)), dir: t.TempDir()}
	t.Cleanup(func() {
		_, _ = m.Cmd("kill-server")
	})
	return m
}

// Cmd runs a tmux command on this server.
func (m *Tmux) Cmd(args ...string) (string, error) {
	c := exec.Command("tmux", append([]string{"-L", m.sock, "-f", "/dev/null"}, args...)...)
	c.Env = TmuxEnv(m.dir)
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Must is Cmd, failing the test on an error.
func (m *Tmux) Must(args ...string) string {
	m.t.Helper()
	out, err := m.Cmd(args...)
	if err != nil {
		m.t.Fatal(err)
	}
	return out
}

// Start runs command (a shell command line) in a new session of the size.
func (m *Tmux) Start(name string, cols, rows int, command string) {
	m.t.Helper()
	m.Must("new-session", "-d", "-s", name, "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), command)
	m.Must("set-option", "-t", name, "remain-on-exit", "on")
}

// Capture is the pane's text, as capture-pane -p prints it.
func (m *Tmux) Capture(name string) string {
	m.t.Helper()
	return m.Must("capture-pane", "-p", "-t", name)
}

// Cursor is the pane's cursor.
func (m *Tmux) Cursor(name string) (int, int) {
	m.t.Helper()
	out := strings.TrimSpace(m.Must("display-message", "-p", "-t", name, "#{cursor_x},#{cursor_y}"))
	xs, ys, _ := strings.Cut(out, ",")
	x, _ := strconv.Atoi(xs)
	y, _ := strconv.Atoi(ys)
	return x, y
}

// Stable waits until the pane's capture stays the same for a while and
// satisfies ok, and returns it.
func (m *Tmux) Stable(name string, ok func(string) bool) string {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last, same := "", 0
	for time.Now().Before(deadline) {
		cur := m.Capture(name)
		if cur == last && ok(cur) {
			if same++; same >= 3 {
				return cur
			}
		} else {
			same = 0
		}
		last = cur
		time.Sleep(50 * time.Millisecond)
	}
	m.t.Fatalf("tmux pane %s never settled; last:\n%s", name, last)
	return ""
}

// Replay shows data in a tmux pane of the size exactly as written (the
// pane's terminal in raw mode, so no newline translation) and returns the
// pane's text and cursor.
func (m *Tmux) Replay(name string, cols, rows int, data []byte) (string, int, int) {
	m.t.Helper()
	dir := m.t.TempDir()
	file := filepath.Join(dir, "bytes")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		m.t.Fatal(err)
	}
	done := filepath.Join(dir, "done")
	m.Start(name, cols, rows, fmt.Sprintf("stty raw -echo; cat %s; touch %s; exec sleep 3600", file, done))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("tmux pane %s: cat did not finish", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	text := m.Stable(name, func(string) bool { return true })
	x, y := m.Cursor(name)
	return text, x, y
}

// Screen is what CompareReplay reads of our screen (a vt.Screen).
type Screen interface {
	Text() string
	Cursor() (x, y int)
}

// CompareReplay replays data in tmux and compares the pane with s: "" if
// they agree, else how they differ. A difference must last (tmux may
// settle late on a busy machine).
func (m *Tmux) CompareReplay(name string, cols, rows int, data []byte, s Screen) string {
	m.t.Helper()
	want, wx, wy := m.Replay(name, cols, rows, data)
	var d string
	for range 5 {
		d = DiffScreens(want, s.Text())
		if x, y := s.Cursor(); d == "" && (x != wx || y != wy) {
			d = fmt.Sprintf("cursor at %d,%d, tmux has %d,%d", x, y, wx, wy)
		}
		if d == "" {
			return ""
		}
		time.Sleep(300 * time.Millisecond)
		want = m.Capture(name)
		wx, wy = m.Cursor(name)
	}
	return "screens differ from tmux:\n" + d
}

// DiffScreens describes where two screens' texts differ, or "" if they do
// not.
func DiffScreens(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "row %d:\n  tmux: %q\n  ours: %q\n", i, wl, gl)
		}
	}
	return b.String()
}

// SetHistoryLimit sets the history-limit of panes made from now on. tmux
// reads it when a pane is made, and a server without a session exits, so
// a session that only sleeps holds the server.
func (m *Tmux) SetHistoryLimit(n int) {
	m.t.Helper()
	if _, err := m.Cmd("has-session", "-t", "hold"); err != nil {
		m.Must("new-session", "-d", "-s", "hold", "-x", "20", "-y", "5", "exec sleep 3600")
	}
	m.Must("set-option", "-g", "history-limit", strconv.Itoa(n))
}

// CaptureAll is capture-pane -p -S -n and the cursor.
func (m *Tmux) CaptureAll(name string, n int) (string, int, int) {
	m.t.Helper()
	out := m.Must("capture-pane", "-p", "-t", name, "-S", strconv.Itoa(-n))
	x, y := m.Cursor(name)
	return out, x, y
}

// ResizePane resizes the pane's window and waits until tmux has done it.
func (m *Tmux) ResizePane(name string, cols, rows int) {
	m.t.Helper()
	m.Must("resize-window", "-t", name, "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows))
	deadline := time.Now().Add(10 * time.Second)
	want := strconv.Itoa(cols) + "x" + strconv.Itoa(rows)
	for {
		got := strings.TrimSpace(m.Must("display-message", "-p", "-t", name, "#{pane_width}x#{pane_height}"))
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("pane %s is %s, want %s", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HistoryScreen is what CaptureOf reads of our screen (a vt.Screen).
type HistoryScreen interface {
	Screen
	History(n int, ansi bool) []string
}

// CaptureOf is what capture-pane -p -S -n prints, from s.
func CaptureOf(s HistoryScreen, n int) string {
	var b strings.Builder
	for _, l := range s.History(n, false) {
		b.WriteString(l + "\n")
	}
	b.WriteString(s.Text())
	return b.String()
}
