package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// Terminal agents end to end (docs/terminal.md): the real binary's screen,
// send, attach and notify against a real daemon and real programs.

// TestNotifyFromAProgram: tend notify, run by a program under tend (as an
// agent's hook runs it), reaches the daemon through the run's
// NOTIFY_SOCKET: readiness, a status line, a turn's start and end.
func TestNotifyFromAProgram(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	gate := filepath.Join(dir, "gate")
	write(t, conf, fmt.Sprintf(`[program.agent]
shell = '''tend notify --ready --status "reading the issue" --turn active && while [ ! -e "$GATE" ]; do sleep 0.05; done; tend notify --turn idle --status "waiting for work"; exec sleep 100000'''
agent = true
ready = "notify"
turn_idle_after = "1h"
env = { PATH = %q, GATE = %q }
`, filepath.Dir(tend)+":"+os.Getenv("PATH"), gate))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	startUp(t, tend, conf)
	testutil.Eventually(t, "agent:0 ready, in its turn, with its status", func() bool {
		st, err := c.Status("agent:0")
		return err == nil && st.Ready && st.TurnActive && st.StatusText == "reading the issue"
	}, testutil.Explain(eventsOf(c)))
	write(t, gate, "")
	testutil.Eventually(t, "agent:0's turn to end", func() bool {
		st, err := c.Status("agent:0")
		return err == nil && !st.TurnActive && st.Lifecycle == program.LifecycleIdle && st.StatusText == "waiting for work"
	}, testutil.Explain(eventsOf(c)))
}

// terminalFleet is the fleet of the terminal tests: shell (a shell in a
// terminal), once and twice (shells that are not restarted), worker (no
// terminal). It skips the test when the daemon has no terminals yet.
func terminalFleet(t *testing.T) (tend, conf string, c *client.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tendtty") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tend = tendBinary(t)
	conf = filepath.Join(dir, "tend.toml")
	write(t, conf, `[defaults]
stop_grace = "2s"

[program.shell]
command = ["sh"]
tty = true
tty_size = "80x24"
env = { PS1 = "tend$ " }

[program.once]
command = ["sh"]
tty = true
restart = "never"
env = { PS1 = "once$ " }

[program.twice]
command = ["sh"]
tty = true
restart = "never"
env = { PS1 = "twice$ " }

[program.worker]
command = ["sleep", "100000"]
`)
	up, log := startUpLogged(t, tend, conf)
	c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
	testutil.Eventually(t, "the daemon", func() bool {
		if up.ProcessState == nil {
			if _, err := c.Health(); err == nil {
				return true
			}
		}
		return strings.Contains(log(), "tty")
	})
	if strings.Contains(log(), "unknown key") {
		t.Fatalf("the daemon does not know tty: %s", log())
	}
	waitRunning(t, c, "shell:0", "once:0", "twice:0", "worker:0")
	var apiErr *client.APIError
	if _, err := c.Screen("shell:0", false); errors.As(err, &apiErr) && apiErr.Status == 501 {
		t.Fatalf("the daemon serves no terminals: %v", err)
	}
	return tend, conf, c
}

// screenShows waits until id's screen shows want.
func screenShows(t *testing.T, c *client.Client, id, want string) {
	t.Helper()
	var last string
	testutil.Eventually(t, id+"'s screen to show "+want, func() bool {
		scr, err := c.Screen(id, false)
		last = strings.Join(scr.Lines, "\n")
		return err == nil && strings.Contains(last, want)
	}, testutil.Explain(func() string { return last }))
}

func TestTerminalVerbs(t *testing.T) {
	tend, conf, c := terminalFleet(t)
	screenShows(t, c, "shell:0", "tend$")

	if code, out, errb := tendRun(t, tend, "-c", conf, "send", "shell:0", "echo $((6 * 7))", "--enter"); code != 0 || out != "" {
		t.Fatalf("send: exit %d %q %q", code, out, errb)
	}
	screenShows(t, c, "shell:0", "tend$ echo $((6 * 7))\n42\ntend$")
	code, out, _ := tendRun(t, tend, "-c", conf, "screen", "shell:0")
	if lines := strings.Split(out, "\n"); code != 0 || len(lines) != 25 || lines[1] != "42" {
		t.Errorf("screen: exit %d, %d lines:\n%s", code, len(lines), out)
	}
	if code, out, _ := tendRun(t, tend, "-c", conf, "screen", "shell:0", "--json"); code != 0 || !strings.Contains(out, `"cols": 80`) {
		t.Errorf("screen --json: exit %d\n%s", code, out)
	}
	st, err := c.Status("shell:0")
	if err != nil || st.TTY == nil || st.TTY.Cols != 80 || st.TTY.Rows != 24 {
		t.Errorf("the status's tty: %+v, %v", st.TTY, err)
	}

	for _, bad := range []struct {
		args  []string
		code  int
		words string
	}{
		{[]string{"screen", "worker:0"}, 1, "worker:0 is not a terminal program (tty = false)"},
		{[]string{"send", "worker:0", "x"}, 1, "worker:0 is not a terminal program (tty = false)"},
		{[]string{"attach", "worker:0", "--read-only"}, 1, "worker:0 is not a terminal program (tty = false)"},
		{[]string{"screen", "nosuch:0"}, 3, "nosuch:0"},
		{[]string{"send", "nosuch:0", "x"}, 3, "nosuch:0"},
		{[]string{"attach", "nosuch:0", "--read-only"}, 3, "nosuch:0"},
		{[]string{"send", "shell:0", "--keys", "a,,b"}, 2, "an empty key"},
		{[]string{"send", "shell:0", strings.Repeat("x", 65<<10)}, 2, "64 KiB"},
		{[]string{"attach", "shell:0"}, 2, "stdin is not a terminal"}, // tendRun's stdin is /dev/null
	} {
		code, _, errb := tendRun(t, tend, append([]string{"-c", conf}, bad.args...)...)
		if code != bad.code || !strings.Contains(errb, bad.words) || strings.Count(errb, "\n") != 1 {
			t.Errorf("tend %.60q: exit %d %q; want %d and %q", bad.args, code, errb, bad.code, bad.words)
		}
	}

	// Read-only without a terminal: the screen, then what comes.
	var watched, stderr testutil.Buffer
	watch := exec.Command(tend, "-c", conf, "attach", "shell:0", "--read-only")
	watch.Stdout, watch.Stderr = &watched, &stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()
	t.Cleanup(func() { watch.Process.Kill(); <-done; done <- nil })
	testutil.Eventually(t, "the read-only attach to show the screen", func() bool { return strings.Contains(watched.String(), "42") })
	tendRun(t, tend, "-c", conf, "send", "shell", "echo watched", "--enter")
	testutil.Eventually(t, "the read-only attach to see the output", func() bool { return strings.Contains(watched.String(), "watched") })
	watch.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("read-only attach after SIGINT: %v, stderr %q", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Error("read-only attach did not end on SIGINT")
	}
}

// ptyAttach is tend attach running in a pseudo-terminal that is its
// controlling terminal, as in a person's terminal window.
type ptyAttach struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	done   chan struct{}

	mu  sync.Mutex // guards scr and raw
	scr *vt.Screen
	raw bytes.Buffer
}

func startPTYAttach(t *testing.T, tend, conf string, cols, rows int, args ...string) *ptyAttach {
	t.Helper()
	return startPTY(t, tend, conf, cols, rows, append([]string{"attach"}, args...)...)
}

// startPTY runs tend -c conf ARGS in a pseudo-terminal of cols x rows.
func startPTY(t *testing.T, tend, conf string, cols, rows int, args ...string) *ptyAttach {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	pty.Setsize(master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	a := &ptyAttach{t: t, master: master, done: make(chan struct{}), scr: vt.NewScreen(vt.Size{Cols: cols, Rows: rows})}
	a.cmd = exec.Command(tend, append([]string{"-c", conf}, args...)...)
	a.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	a.cmd.Stdin, a.cmd.Stdout, a.cmd.Stderr = slave, slave, slave
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				a.mu.Lock()
				a.scr.Feed(buf[:n])
				a.raw.Write(buf[:n])
				a.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.done
		master.Close()
	})
	return a
}

func (a *ptyAttach) typed(s string) {
	a.t.Helper()
	if _, err := a.master.Write([]byte(s)); err != nil {
		a.t.Fatal(err)
	}
}

// shows waits until the terminal shows want.
func (a *ptyAttach) shows(want string) {
	a.t.Helper()
	var last string
	testutil.Eventually(a.t, "the attached terminal to show "+want, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		last = a.scr.Text()
		return strings.Contains(last, want)
	}, testutil.Explain(func() string {
		a.mu.Lock()
		defer a.mu.Unlock()
		return fmt.Sprintf("%s\nthe bytes it was sent: %q", last, a.raw.String())
	}))
}

// sent waits until want was written to the terminal.
func (a *ptyAttach) sent(want string) {
	a.t.Helper()
	testutil.Eventually(a.t, "the attached terminal to be sent "+want, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return strings.Contains(a.raw.String(), want)
	})
}

func (a *ptyAttach) exit() int {
	a.t.Helper()
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		a.t.Fatal("tend attach did not end")
	}
	return a.cmd.ProcessState.ExitCode()
}

func TestAttachEndToEnd(t *testing.T) {
	tend, conf, c := terminalFleet(t)
	tendRun(t, tend, "-c", conf, "send", "shell:0", "echo before attach", "--enter")
	screenShows(t, c, "shell:0", "before attach\ntend$")

	a := startPTYAttach(t, tend, conf, 100, 30, "shell:0")
	a.shows("before attach") // the screen at once
	testutil.Eventually(t, "the window size applied", func() bool {
		st, err := c.Status("shell:0")
		return err == nil && st.TTY != nil && st.TTY.Cols == 100 && st.TTY.Rows == 30 && st.TTY.Clients == 1
	})
	a.typed("stty size\r")
	a.shows("30 100")

	// The window size followed: the kernel signals the attach (SIGWINCH).
	pty.Setsize(a.master, &pty.Winsize{Cols: 120, Rows: 40})
	testutil.Eventually(t, "the new window size", func() bool {
		st, err := c.Status("shell:0")
		return err == nil && st.TTY != nil && st.TTY.Cols == 120 && st.TTY.Rows == 40
	})
	a.typed("clear; stty size\r")
	a.shows("40 120")

	// Across runs: the notice, then the next run's prompt.
	if code, _, errb := tendRun(t, tend, "-c", conf, "restart", "shell:0"); code != 0 {
		t.Fatalf("restart: %d %s", code, errb)
	}
	a.sent("[tend] shell:0")
	a.typed("echo next run\r")
	a.shows("next run")

	// Detach: the run goes on.
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Errorf("detach: exit %d", code)
	}
	a.sent("[detached from shell:0]")
	waitRunning(t, c, "shell:0")

	// The instance ends done, or in error: exit 0, or 1.
	a = startPTYAttach(t, tend, conf, 80, 24, "once:0")
	a.shows("once$")
	a.typed("exit 0\r")
	if code := a.exit(); code != 0 {
		t.Errorf("once:0 ended done: exit %d", code)
	}
	a = startPTYAttach(t, tend, conf, 80, 24, "twice:0")
	a.shows("twice$")
	a.typed("exit 3\r")
	if code := a.exit(); code != 1 {
		t.Errorf("twice:0 ended in error: exit %d", code)
	}

	// The last screen of an ended run; attach to it is refused with why.
	if code, out, _ := tendRun(t, tend, "-c", conf, "screen", "once:0"); code != 0 || !strings.Contains(out, "once$ exit 0") {
		t.Errorf("screen of the ended once:0: exit %d\n%s", code, out)
	}
	a = startPTYAttach(t, tend, conf, 80, 24, "once:0")
	if code := a.exit(); code != 1 {
		t.Errorf("attach to the ended once:0: exit %d", code)
	}
	a.sent("once:0 is not running")
}

// TestAttachRestoresTheTerminalOnSignals: SIGTERM and SIGHUP end tend
// attach with the terminal's modes as they were.
func TestAttachRestoresTheTerminalOnSignals(t *testing.T) {
	tend, conf, _ := terminalFleet(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		master, slave, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		before, _ := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		cmd := exec.Command(tend, "-c", conf, "attach", "shell:0")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Raw mode comes after the signal handlers.
		testutil.Eventually(t, "raw mode", func() bool {
			tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
			return err == nil && tio.Lflag&unix.ICANON == 0
		})
		go io.Copy(io.Discard, master)
		cmd.Process.Signal(sig)
		err = cmd.Wait()
		after, _ := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
		if *after != *before {
			t.Errorf("after %v the terminal's modes are %+v, were %+v", sig, after, before)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("after %v: %v, want exit 1", sig, err)
		}
		slave.Close()
		master.Close()
	}
}

// TestRunTTYAttachedEndToEnd: tend run --tty --attach is attached to the
// new program's terminal as tend attach is, and exits with the run's
// status; a detach leaves the run going.
func TestRunTTYAttachedEndToEnd(t *testing.T) {
	tend, conf, c := terminalFleet(t)
	a := startPTY(t, tend, conf, 80, 24, "run", "--name", "job", "--tty", "-a", "--", "sh", "-c", `printf 'name? '; read l; echo "got $l"; exit 3`)
	a.shows("name?")
	a.typed("tend\r")
	a.shows("got tend")
	if code := a.exit(); code != 3 {
		t.Errorf("tend run of a run that exits 3: exit %d", code)
	}

	// A run over before the attach: its screen all the same.
	a = startPTY(t, tend, conf, 80, 24, "run", "--name", "quick", "--tty", "-a", "--restart", "never", "--", "echo", "hello from a quick run")
	if code := a.exit(); code != 0 {
		t.Errorf("tend run of a quick run: exit %d", code)
	}
	a.sent("hello from a quick run")

	a = startPTY(t, tend, conf, 80, 24, "run", "--name", "stays", "--tty", "-a", "--", "sh")
	a.typed("echo $((6 * 7))\r")
	a.shows("42")
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Errorf("detach from tend run: exit %d", code)
	}
	waitRunning(t, c, "stays:0")
}
