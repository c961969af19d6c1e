package terminal

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// Real programs under our terminal and under tmux, driven by the same
// keys: the screens must agree.

// run is a program under one of our Terminals.
type run struct {
	t    *testing.T
	term *Terminal
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []byte // everything the program wrote, as Output got it
}

// programEnv is a fixed, small environment for the programs on both sides.
func programEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"HOME=/nonexistent", "PS1=$ ", "HISTFILE=/dev/null", "INPUTRC=/dev/null", "LESSHISTFILE=-", "PYTHONSTARTUP="}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/local/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	return testutil.NeedTool(t, name)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func startRun(t *testing.T, size vt.Size, argv ...string) *run {
	t.Helper()
	return startRunIn(t, size, programEnv(), t.TempDir(), argv...)
}

// startRunIn is startRun with the environment env, in the directory dir.
func startRunIn(t *testing.T, size vt.Size, env []string, dir string, argv ...string) *run {
	t.Helper()
	r := &run{t: t}
	term, slave, err := Open(Options{Size: size})
	if err != nil {
		t.Fatal(err)
	}
	pump(term, func(p []byte) {
		r.mu.Lock()
		r.out = append(r.out, p...)
		r.mu.Unlock()
	})
	r.term = term
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = SysProcAttr()
	cmd.Env = env
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		slave.Close()
		term.Close()
		t.Fatal(err)
	}
	slave.Close()
	r.cmd = cmd
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its session is its process group
		_ = cmd.Wait()
		term.Close()
	})
	return r
}

func (r *run) output() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.out)
}

// settle waits until the screen satisfies ok and has not changed for a
// while, and returns its text.
func (r *run) settle(ok func(string) bool) string {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last, same := "", 0
	for time.Now().Before(deadline) {
		cur := r.term.Text()
		if cur == last && ok(cur) {
			if same++; same >= 4 {
				return cur
			}
		} else {
			same = 0
		}
		last = cur
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("screen never settled; last:\n%s", last)
	return ""
}

// step is typed into both sides: text (tmux's send-keys -l), then keys
// (tmux's key names), then the screens are compared once both show want.
type step struct {
	text string
	keys []string
	want string
}

func contains(want string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, want) }
}

// checkLive runs argv in tmux and under a Terminal, types the steps into
// both, and compares the screens and cursors after each.
func checkLive(t *testing.T, size vt.Size, argv []string, first string, steps []step) *run {
	m := newTmux(t)
	r := startRun(t, size, argv...)
	var line []string
	for _, kv := range programEnv() {
		line = append(line, shellQuote(kv))
	}
	for _, a := range argv {
		line = append(line, shellQuote(a))
	}
	m.start("live", size, "cd "+shellQuote(r.cmd.Dir)+" && exec env -i "+strings.Join(line, " "))
	// Both sides settle on want; a difference that lasts is a failure (one
	// side may settle a moment before the other on a busy machine).
	compare := func(what, want string) {
		t.Helper()
		sameScreens(t, what, m, "live", r,
			func() string { return m.Stable("live", contains(want)) },
			func() string { return r.settle(contains(want)) })
	}
	compare("start", first)
	for i, st := range steps {
		if st.text != "" {
			m.Must("send-keys", "-t", "live", "-l", st.text)
			if err := r.term.Send(vt.Input{Text: st.text}); err != nil {
				t.Fatal(err)
			}
		}
		if len(st.keys) > 0 {
			m.Must(append([]string{"send-keys", "-t", "live"}, st.keys...)...)
			if err := r.term.Send(vt.Input{Keys: st.keys}); err != nil {
				t.Fatal(err)
			}
		}
		compare(fmt.Sprintf("step %d (%q %v)", i, st.text, st.keys), st.want)
	}
	return r
}

// cursor is the screen's cursor, for tests.
func (t *Terminal) cursor() (x, y int) {
	t.View(func(s *vt.Screen) { x, y = s.Cursor() })
	return x, y
}

// typed is s as keys, one character each: typed rather than pasted.
func typed(s string) []string {
	var keys []string
	for _, r := range s {
		if r == '\r' {
			keys = append(keys, "Enter")
			continue
		}
		keys = append(keys, string(r))
	}
	return keys
}

// writeSeed keeps a program's output as a seed of FuzzFeed when
// TEND_FUZZ_SEEDS names the corpus directory (vt/testdata/fuzz/FuzzFeed).
func writeSeed(t *testing.T, data []byte, size vt.Size) {
	dir := os.Getenv("TEND_FUZZ_SEEDS")
	if dir == "" {
		return
	}
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint16(%d)\nuint8(%d)\nuint8(%d)\n",
		data, len(data)/3, size.Cols-vt.MinCols, size.Rows-vt.MinRows)
	name := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// checkRecorded replays what a run wrote into tmux and into a fresh
// vt.Screen, and compares those; and the live screen must be that screen too.
func checkRecorded(t *testing.T, r *run, size vt.Size) {
	t.Helper()
	data := r.output()
	writeSeed(t, data, size)
	s := vt.NewScreen(size)
	s.Feed(data)
	if live := r.term.Text(); live != s.Text() {
		t.Errorf("the live screen differs from the same bytes fed at once:\n%s", diffScreens(s.Text(), live))
	}
	m := newTmux(t)
	if d := m.compareReplay("replay", size, data, s); d != "" {
		t.Errorf("replayed output: %s", d)
	}
}

func TestBashMatchesTmux(t *testing.T) {
	bash := lookPath(t, "bash")
	size := vt.Size{Cols: 80, Rows: 24}
	r := checkLive(t, size, []string{bash, "--norc", "--noprofile"}, "$", []step{
		{text: "echo hello world", keys: []string{"Enter"}, want: "hello world\n$"},
		{text: `printf 'a\tb\tc\n'`, keys: []string{"Enter"}, want: "a       b"},
		{text: "echo " + strings.Repeat("wrap-", 30), keys: []string{"Enter"}, want: "wrap-wrap-\n$"},
		{text: "for i in 1 2 3; do echo line$i; done", keys: []string{"Enter"}, want: "line3\n$"},
		{keys: []string{"Up", "Enter"}, want: "line3\n$ for"},
		{text: "echo abXc", keys: []string{"Left", "BSpace", "Enter"}, want: "\nabc\n"},
		{text: `printf '\e[31mred\e[0m 中文 😀 e\xcc\x81\n'`, keys: []string{"Enter"}, want: "red 中文"},
		{text: "sleep 10", want: "$ sleep 10"}, // typed first: C-c is a signal, which does not wait for bash to read the text
		{keys: []string{"C-c"}, want: "^C"},
		{text: "seq 1 40", keys: []string{"Enter"}, want: "40\n$"},
		{text: "echo done", keys: []string{"C-a", "C-k"}, want: "$"},
		{text: "clear", keys: []string{"Enter"}, want: "$"},
	})
	checkRecorded(t, r, size)
}

func TestPythonMatchesTmux(t *testing.T) {
	python := lookPath(t, "python3")
	size := vt.Size{Cols: 80, Rows: 24}
	r := checkLive(t, size, []string{python, "-q", "-i"}, ">>>", []step{
		{text: "1+1", keys: []string{"Enter"}, want: "2\n>>>"},
		{text: "print('x'*100)", keys: []string{"Enter"}, want: "xxxx\n>>>"},
		{text: "def f():", keys: []string{"Enter"}, want: "..."},
		{text: "    return 42", keys: []string{"Enter", "Enter"}, want: "\n>>>"},
		{text: "f()", keys: []string{"Enter"}, want: "42\n>>>"},
		{text: `print("\x1b[1mbold\x1b[0m", "日本", "\u00e9")`, keys: []string{"Enter"}, want: "bold 日本"},
		{text: "1/0", keys: []string{"Enter"}, want: "ZeroDivisionError"},
	})
	checkRecorded(t, r, size)
}

func TestVimMatchesTmux(t *testing.T) {
	vim := lookPath(t, "vim")
	size := vt.Size{Cols: 80, Rows: 24}
	dir := t.TempDir()
	file := filepath.Join(dir, "text.txt")
	var content strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&content, "line %d: the quick brown fox 中文 jumps\n", i)
	}
	if err := os.WriteFile(file, []byte(content.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, size, vim, "-u", "NONE", "-N", "-i", "NONE", "-n", file)
	r.settle(contains("line 1:"))
	for _, in := range []vt.Input{
		{Keys: []string{"G"}}, {Keys: []string{"g", "g"}}, {Keys: typed(":set number\r")},
		{Keys: []string{"C-f"}}, {Keys: []string{"j", "j", "d", "d"}}, {Keys: append(typed("Ohello 😀 there"), "Escape")},
		{Keys: typed("/fox\r")}, {Keys: []string{"C-b"}}, {Keys: typed(":split\r")},
		{Keys: typed("ipasted: ")}, {Text: "some pasted text", Keys: []string{"Escape"}},
	} {
		if err := r.term.Send(in); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	r.settle(contains("text.txt"))
	checkRecorded(t, r, size)
}

func TestLessMatchesTmux(t *testing.T) {
	less := lookPath(t, "less")
	size := vt.Size{Cols: 80, Rows: 24}
	file := filepath.Join(t.TempDir(), "text.txt")
	var content strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&content, "%d\t%s\n", i, strings.Repeat("word ", i%25))
	}
	if err := os.WriteFile(file, []byte(content.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, size, less, file)
	r.settle(contains("text.txt"))
	for _, in := range []vt.Input{
		{Keys: []string{"Space"}}, {Keys: []string{"Space"}}, {Keys: []string{"b"}}, {Keys: []string{"j", "j", "j"}},
		{Keys: typed("/150\r")}, {Keys: []string{"k", "k"}}, {Keys: []string{"G"}}, {Keys: []string{"Up", "Up"}},
	} {
		if err := r.term.Send(in); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	r.settle(contains("298"))
	checkRecorded(t, r, size)
}

func TestTopMatchesTmux(t *testing.T) {
	top := lookPath(t, "top")
	size := vt.Size{Cols: 100, Rows: 30}
	r := startRun(t, size, top, "-d", "0.3")
	r.settle(contains("PID"))
	time.Sleep(time.Second) // a few refreshes
	// Stop it between two refreshes: from then on the bytes are fixed.
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-r.cmd.Process.Pid, syscall.SIGCONT)
	r.settle(contains("PID"))
	checkRecorded(t, r, size)
}

// sameScreens fails t unless tmux's pane and r's screen (as theirs and ours
// read them, each once settled) and their cursors come out the same; a
// difference that lasts is a failure, one side may settle a moment before
// the other on a busy machine.
func sameScreens(t *testing.T, what string, m *tmuxServer, pane string, r *run, theirs, ours func() string) {
	t.Helper()
	var diff string
	for range 10 {
		th, us := theirs(), ours()
		wx, wy := m.Cursor(pane)
		x, y := r.term.cursor()
		diff = diffScreens(th, us)
		if diff == "" && x == wx && y == wy {
			return
		}
		if diff == "" {
			diff = fmt.Sprintf("cursor at %d,%d, tmux has %d,%d", x, y, wx, wy)
		} else {
			diff += "ours:\n" + us
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: screens differ from the program's under tmux:\n%s", what, diff)
}
