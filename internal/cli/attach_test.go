package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// attachRun is tend attach running in this process with a pseudo-terminal
// as its stdin and stdout, as in a person's terminal window: the test
// types into the terminal's master and reads what it shows.
type attachRun struct {
	t      *testing.T
	master *os.File
	slave  *os.File
	before *unix.Termios // the slave's modes before attach

	mu  sync.Mutex // guards scr and raw
	scr *vt.Screen
	raw bytes.Buffer

	code   chan int
	stderr testutil.Buffer
}

// attachPTY runs tend attach ARGS on a terminal of cols x rows.
func (d *fakeDaemon) attachPTY(t *testing.T, cols, rows int, args ...string) *attachRun {
	t.Helper()
	return d.ptyTend(t, cols, rows, append([]string{"attach"}, args...)...)
}

// ptyTend runs tend ARGS on a terminal of cols x rows.
func (d *fakeDaemon) ptyTend(t *testing.T, cols, rows int, args ...string) *attachRun {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	a := &attachRun{t: t, master: master, slave: slave, before: before, code: make(chan int, 1),
		scr: vt.NewScreen(vt.Size{Cols: 80, Rows: 24})}
	if cols > 0 {
		a.scr = vt.NewScreen(vt.Size{Cols: cols, Rows: rows})
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			if err != nil {
				return
			}
			a.mu.Lock()
			a.scr.Feed(buf[:n])
			a.raw.Write(buf[:n])
			a.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		a.code <- mainWith(ctx, parts, append([]string{"--socket", d.sock}, args...), slave, slave, &a.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-a.code:
			a.code <- c
		case <-time.After(20 * time.Second):
			t.Error("tend attach did not end")
		}
		slave.Close()
		master.Close()
		<-readDone
	})
	return a
}

// typed writes keystrokes into the terminal.
func (a *attachRun) typed(s string) {
	a.t.Helper()
	if _, err := a.master.Write([]byte(s)); err != nil {
		a.t.Fatal(err)
	}
}

// shows waits until the terminal shows want somewhere.
func (a *attachRun) shows(want string) {
	a.t.Helper()
	testutil.Eventually(a.t, "the terminal to show "+want, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return strings.Contains(a.scr.Text(), want)
	})
}

// sent waits until want has been written to the terminal, whether or not
// it is on the screen now.
func (a *attachRun) sent(want string) {
	a.t.Helper()
	testutil.Eventually(a.t, "the terminal to be sent "+want, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return strings.Contains(a.raw.String(), want)
	})
}

// exit waits for tend attach to end and returns its status.
func (a *attachRun) exit() int {
	a.t.Helper()
	select {
	case c := <-a.code:
		a.code <- c
		return c
	case <-time.After(20 * time.Second):
		a.t.Fatalf("tend attach did not end; stderr %q", a.stderr.String())
		return -1
	}
}

// restored checks that the terminal's modes are back as they were, and
// the modes a program may have set are undone.
func (a *attachRun) restored() {
	a.t.Helper()
	after, err := unix.IoctlGetTermios(int(a.slave.Fd()), unix.TCGETS)
	if err != nil {
		a.t.Fatal(err)
	}
	if *after != *a.before {
		a.t.Errorf("terminal modes after attach %+v, before %+v", after, a.before)
	}
	testutil.Eventually(a.t, "the reset of the terminal's modes", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		raw := a.raw.String()
		i := strings.LastIndex(raw, resetModes)
		if i < 0 {
			return false
		}
		rest := strings.TrimPrefix(raw[i+len(resetModes):], "\x1b[?1007l")
		return rest == "" || rest == "\x1b[?1049l" || rest == "\x1b[?1049l\x1b[999;1H\r\n"
	})
}

// raw reports whether the terminal is in raw mode now.
func (a *attachRun) isRaw() bool {
	tio, err := unix.IoctlGetTermios(int(a.slave.Fd()), unix.TCGETS)
	return err == nil && tio.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) == 0
}

func TestAttachVerb(t *testing.T) {
	d := ttyDaemon(t)
	d.tt.Output("planner:0", []byte("earlier output"))
	a := d.attachPTY(t, 30, 8, "planner:0")

	// The screen at once, the terminal raw, the window size applied.
	a.shows("> earlier output")
	if !a.isRaw() {
		t.Error("the terminal is not in raw mode")
	}
	testutil.Eventually(t, "the window size applied", func() bool { c, r := d.tt.Size("planner:0"); return c == 30 && r == 8 })

	// Keystrokes go to the run, and its answer comes back.
	a.typed("hello\r")
	a.shows("you said: hello")

	// The size followed.
	if err := pty.Setsize(a.master, &pty.Winsize{Cols: 50, Rows: 12}); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	testutil.Eventually(t, "the new window size", func() bool { c, r := d.tt.Size("planner:0"); return c == 50 && r == 12 })

	// Across runs: the notice, then the next run's screen.
	d.tt.NewRun("planner:0", "[tend] planner:0 exited: exit 1 (runtime_error), crash 1 of 5; next run in 0s")
	a.sent("[tend] planner:0 exited: exit 1 (runtime_error)")

	// Ctrl-P followed by another key is typed; Ctrl-P Ctrl-Q detaches.
	a.typed("\x10x")
	a.typed("\x10")
	a.typed("\x11")
	if code := a.exit(); code != 0 || !strings.Contains(a.stderr.String(), "[detached from planner:0]") {
		t.Errorf("detach: exit %d, stderr %q", code, a.stderr.String())
	}
	if got := string(d.tt.Typed("planner:0")); got != "hello\r\x10x" {
		t.Errorf("typed %q, want hello, Enter, Ctrl-P x and no detach keys", got)
	}
	a.restored()
	testutil.Eventually(t, "the client gone", func() bool { return d.tt.Clients("planner:0") == 0 })
}

func TestAttachDetachKeys(t *testing.T) {
	d := ttyDaemon(t)
	a := d.attachPTY(t, 30, 8, "planner:0", "--detach-keys", "ctrl-a,d")
	a.shows(">")
	a.typed("\x10\x11a\x01x\x01d")
	if code := a.exit(); code != 0 {
		t.Errorf("exit %d, stderr %q", code, a.stderr.String())
	}
	if got := string(d.tt.Typed("planner:0")); got != "\x10\x11a\x01x" {
		t.Errorf("typed %q", got)
	}

	// No detach keys: everything is typed; the end of the run ends it.
	a = d.attachPTY(t, 30, 8, "shell:0", "--detach-keys", "")
	a.shows(">")
	a.typed("\x10\x11")
	testutil.Eventually(t, "Ctrl-P Ctrl-Q typed", func() bool { return string(d.tt.Typed("shell:0")) == "\x10\x11" })
	d.tt.End("shell:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	if code := a.exit(); code != 0 {
		t.Errorf("exit %d when the run ended done; stderr %q", code, a.stderr.String())
	}
	a.restored()
}

func TestAttachEnds(t *testing.T) {
	d := ttyDaemon(t)
	a := d.attachPTY(t, 30, 8, "planner:0")
	a.shows(">")
	d.tt.End("planner:0", program.StateExited, program.LifecycleDone, "exited 0", "[tend] planner:0 exited: exit 0 (clean_exit)")
	if code := a.exit(); code != 0 || a.stderr.String() != "" {
		t.Errorf("ended done: exit %d, stderr %q", code, a.stderr.String())
	}
	a.sent("[tend] planner:0 exited: exit 0")
	a.restored()

	a = d.attachPTY(t, 30, 8, "shell:1")
	a.shows(">")
	d.tt.End("shell:1", program.StateFatal, program.LifecycleError, "gave up", "[tend] shell:1 gave up")
	if code := a.exit(); code != 1 || !strings.Contains(a.stderr.String(), "shell:1 has ended: error") {
		t.Errorf("ended in error: exit %d, stderr %q", code, a.stderr.String())
	}
	a.restored()
}

func TestAttachSignals(t *testing.T) {
	d := ttyDaemon(t)
	a := d.attachPTY(t, 30, 8, "planner:0")
	a.shows(">") // drawn after the signals are caught
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := a.exit(); code != 1 || !strings.Contains(a.stderr.String(), "planner:0 goes on") {
		t.Errorf("SIGTERM: exit %d, stderr %q", code, a.stderr.String())
	}
	a.restored()

	a = d.attachPTY(t, 30, 8, "planner:0")
	a.shows(">")
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	if code := a.exit(); code != 0 || !strings.Contains(a.stderr.String(), "[detached from planner:0]") {
		t.Errorf("SIGINT: exit %d, stderr %q", code, a.stderr.String())
	}
	a.restored()
}

func TestAttachReadOnly(t *testing.T) {
	d := ttyDaemon(t)
	// On a terminal: keys are not typed, Ctrl-C detaches, the size is left.
	a := d.attachPTY(t, 30, 8, "planner:0", "--read-only")
	a.shows(">")
	a.typed("rm -rf /\r")
	d.tt.Output("planner:0", []byte("working"))
	a.shows("working")
	a.typed("\x03")
	if code := a.exit(); code != 0 {
		t.Errorf("Ctrl-C: exit %d, stderr %q", code, a.stderr.String())
	}
	if typed := d.tt.Typed("planner:0"); len(typed) != 0 {
		t.Errorf("a read-only attach typed %q", typed)
	}
	if c, r := d.tt.Size("planner:0"); c != 20 || r != 4 {
		t.Errorf("a read-only attach resized to %dx%d", c, r)
	}
	a.restored()

	// Without a terminal at all: the bytes to stdout until the end.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var out, errb testutil.Buffer
	code := make(chan int, 1)
	go func() {
		code <- mainWith(t.Context(), parts, []string{"--socket", d.sock, "attach", "shell:0", "--read-only"}, devnull, &out, &errb)
	}()
	testutil.Eventually(t, "the screen on stdout", func() bool { return strings.Contains(out.String(), "> ") })
	d.tt.End("shell:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	select {
	case c := <-code:
		if c != 0 || strings.Contains(out.String(), resetModes) {
			t.Errorf("read-only without a terminal: exit %d, stderr %q, reset written: %v", c, errb.String(), strings.Contains(out.String(), resetModes))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tend attach --read-only did not end")
	}
}

func TestAttachBadInput(t *testing.T) {
	d := ttyDaemon(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var out, errb bytes.Buffer
	code := mainWith(t.Context(), parts, []string{"--socket", d.sock, "attach", "planner:0"}, devnull, &out, &errb)
	r := result{code, out.String(), errb.String()}
	r.wantErr(t, 2, "stdin is not a terminal")

	for _, c := range []struct {
		args  []string
		code  int
		words string
	}{
		{[]string{"web:0"}, 1, "web:0 is not a terminal program (tty = false)"},
		{[]string{"nosuch:0"}, 3, "nosuch:0"},
		{[]string{"planner:0", "--detach-keys", "ctrl-foo"}, 2, "ctrl-foo"},
		{[]string{"planner:0", "--detach-keys", "ctrl-1"}, 2, "ctrl-1"},
	} {
		a := d.attachPTY(t, 30, 8, c.args...)
		if got := a.exit(); got != c.code || !strings.Contains(a.stderr.String(), c.words) {
			t.Errorf("attach %q: exit %d, stderr %q; want %d and %q", c.args, got, a.stderr.String(), c.code, c.words)
		}
		if *a.before != *must(unix.IoctlGetTermios(int(a.slave.Fd()), unix.TCGETS)) {
			t.Errorf("attach %q changed the terminal's modes", c.args)
		}
	}

	// A terminal that reports no size leaves the run's size as it is.
	a := d.attachPTY(t, 0, 0, "shell:1")
	a.shows(">")
	a.typed("ok\r")
	a.shows("you said: ok")
	if c, r := d.tt.Size("shell:1"); c != 20 || r != 4 {
		t.Errorf("a 0x0 terminal resized the run to %dx%d", c, r)
	}
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestParseDetachKeys(t *testing.T) {
	for in, want := range map[string]string{
		"ctrl-p,ctrl-q":                       "\x10\x11",
		"ctrl-P,ctrl-Q":                       "\x10\x11",
		"ctrl-a,d":                            "\x01d",
		"ctrl-@":                              "\x00",
		"ctrl-[,ctrl-\\,ctrl-],ctrl-^,ctrl-_": "\x1b\x1c\x1d\x1e\x1f",
		"x":                                   "x",
		",":                                   "",
		"":                                    "",
	} {
		got, err := parseDetachKeys(in)
		if in == "," {
			if err == nil {
				t.Errorf("parseDetachKeys(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("parseDetachKeys(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ctrl-", "ctrl-1", "ctrl-pp", "ctrl-p,,ctrl-q", "alt-x", "ab"} {
		if _, err := parseDetachKeys(bad); err == nil {
			t.Errorf("parseDetachKeys(%q) took it", bad)
		}
	}
}

func TestDetacher(t *testing.T) {
	keys := []byte("\x10\x11")
	for _, c := range []struct {
		chunks []string
		out    string
		detach bool
	}{
		{[]string{"abc"}, "abc", false},
		{[]string{"ab\x10\x11cd"}, "ab", true},
		{[]string{"ab\x10", "\x11"}, "ab", true},
		{[]string{"\x10x"}, "\x10x", false},
		{[]string{"\x10", "x"}, "\x10x", false},
		{[]string{"\x10\x10\x11"}, "\x10", true},
		{[]string{"\x11\x10"}, "\x11", false},
	} {
		d := detacher{keys: keys}
		var out []byte
		detach := false
		for _, ch := range c.chunks {
			o, done := d.filter([]byte(ch))
			out = append(out, o...)
			if done {
				detach = true
				break
			}
		}
		if string(out) != c.out || detach != c.detach {
			t.Errorf("%q: sent %q, detach %v; want %q, %v", c.chunks, out, detach, c.out, c.detach)
		}
	}
	d := detacher{}
	if out, done := d.filter([]byte("\x10\x11")); string(out) != "\x10\x11" || done {
		t.Errorf("no keys: %q %v", out, done)
	}
}

// TestRunTTYAttached: tend run --tty --attach attaches as tend attach does;
// a detach leaves the run going (exit 0), and the run's end is the exit
// status.
func TestRunTTYAttached(t *testing.T) {
	d := startDaemon(t)
	a := d.ptyTend(t, 30, 8, "run", "--name", "job", "--tty", "-a", "--", "sh")
	a.shows(">")
	a.typed("hi\r")
	a.shows("you said: hi")
	if got := string(d.tt.Typed("job:0")); got != "hi\r" {
		t.Errorf("typed %q", got)
	}
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 || !strings.Contains(a.stderr.String(), "[detached from job:0]") {
		t.Errorf("detach: exit %d, stderr %q", code, a.stderr.String())
	}
	a.restored()

	a = d.ptyTend(t, 30, 8, "run", "--name", "job2", "--tty", "-a", "--", "sh")
	a.shows(">")
	code := 3
	d.ev.Publish(program.KindExited, "job2:0", &program.Exited{Code: &code, LikelyCause: program.CauseRuntimeError})
	d.tt.End("job2:0", program.StateExited, program.LifecycleError, "exit 3", "")
	if got := a.exit(); got != 3 {
		t.Errorf("the run exited 3: tend run exit %d, stderr %q", got, a.stderr.String())
	}
	a.restored()
}

// TestAttachWaitsForTheDaemon: an attach whose daemon goes away says so in
// one line and waits for the next one at the same socket, then goes on;
// one whose daemon does not come back in time ends (exit 1) saying so,
// with no raw connection error.
func TestAttachWaitsForTheDaemon(t *testing.T) {
	old := reconnectWait
	reconnectWait = 3 * time.Second
	t.Cleanup(func() { reconnectWait = old })
	d := ttyDaemon(t)
	a := d.attachPTY(t, 30, 8, "planner:0")
	a.shows(">")
	d.srv.Close()
	<-d.done // its socket is gone
	a.sent("waiting up to 3s for it to come back")

	next := startDaemonAt(t, d.sock)
	next.fleet()
	next.tt.AddTTY("planner:0", 30, 8)
	next.tt.Output("planner:0", []byte("the next daemon"))
	testutil.Eventually(t, "the next daemon's screen", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return strings.Contains(a.scr.Text(), "the next daemon")
	}, testutil.Explain(func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		return fmt.Sprintf("%q\n%s", a.raw.String(), a.stderr.String())
	}))
	testutil.Eventually(t, "the attach on the next daemon", func() bool { return next.tt.Clients("planner:0") == 1 })
	a.typed("hi\r")
	a.shows("you said: hi")

	next.srv.Close()
	<-next.done
	if code := a.exit(); code != 1 {
		t.Errorf("no daemon came back: exit %d", code)
	}
	errb := a.stderr.String()
	if !strings.Contains(errb, "did not come back within 3s; planner:0 may go on") || strings.Contains(errb, "websocket") || strings.Contains(errb, "failed to") {
		t.Errorf("stderr %q", errb)
	}
	a.restored()
}
