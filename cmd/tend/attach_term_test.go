package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// The client side of a terminal (docs/terminal.md, "Attach" and "Input"):
// tend run -a --tty inline, tend attach on the caller's alternate screen
// and what a detach undoes, an attach across daemon restarts, and what
// tend send types into a real vim.

// TestRunTTYQuickRunsShowEveryByte: tend run --rm -a --tty of a run that
// ends at once shows what it wrote, every time (it once showed nothing in
// 18 of 20 tries), inline: nothing cleared, no alternate screen.
func TestRunTTYQuickRunsShowEveryByte(t *testing.T) {
	tend, conf, _ := terminalFleet(t)
	for i := range 20 {
		marker := fmt.Sprintf("marker-%d", i)
		a := startPTY(t, tend, conf, 80, 24, "run", "--rm", "--tty", "-a", "--", "sh", "-c", "echo "+marker+"; exit 4")
		if code := a.exit(); code != 4 {
			t.Errorf("run %d: exit %d, want the run's 4", i, code)
		}
		a.shows(marker)
		a.mu.Lock()
		raw := a.raw.String()
		_, y := a.scr.Cursor()
		a.mu.Unlock()
		if strings.Contains(raw, "\x1b[2J") || strings.Contains(raw, "\x1b[?1049h") {
			t.Errorf("run %d cleared the screen or left it: %q", i, raw)
		}
		if y == 0 {
			t.Errorf("run %d left the cursor on the first row, where the next output overwrites its line: %q", i, raw)
		}
	}
	a := startPTY(t, tend, conf, 80, 24, "run", "--rm", "--tty", "-a", "--", "ls", "/")
	if code := a.exit(); code != 0 {
		t.Errorf("ls /: exit %d", code)
	}
	a.shows("proc")

	// Into a file or a pipe: the bytes the run wrote, as it wrote them.
	code, out, errb := tendRun(t, tend, "-c", conf, "run", "--rm", "--tty", "-a", "--", "sh", "-c", `printf 'plain \033[1mbold\033[0m\n'; sleep 0.5; printf 'later\n'; exit 3`)
	if code != 3 || out != "plain \x1b[1mbold\x1b[0m\r\nlater\r\n" {
		t.Errorf("tend run --tty -a > pipe: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// TestRunTTYInATmuxPane: the same in a tmux pane, where it showed only the
// exit status.
func TestRunTTYInATmuxPane(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux")
	}
	tend, conf, _ := terminalFleet(t)
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	script := fmt.Sprintf(`%s -c %s run --rm -a --tty -- sh -c 'echo pane-marker; exit 4'; echo "status=$?"; sleep 600`, tend, conf)
	if out, err := tmux("new-session", "-d", "-x", "80", "-y", "24", "sh", "-c", script); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { tmux("kill-server") })
	var pane string
	testutil.Eventually(t, "the pane to show the run's line and its status", func() bool {
		pane, _ = tmux("capture-pane", "-p")
		return strings.Contains(pane, "status=4")
	}, testutil.Explain(func() string { return pane }))
	if !strings.Contains(pane, "pane-marker") {
		t.Errorf("the pane shows the status but not the run's line:\n%s", pane)
	}
}

// TestAttachDetachUndoesModes: tend attach draws on the caller's alternate
// screen (the run's own switches taken out), and a detach from a run that
// turned on the kitty keyboard protocol, alternate scroll and the rest
// undoes each (checked byte by byte) and gives the caller its screen back.
func TestAttachDetachUndoesModes(t *testing.T) {
	tend, conf, _ := terminalFleet(t)
	a := startPTYAttach(t, tend, conf, 80, 24, "shell:0")
	a.shows("tend$")
	set := `\033[?1049h\033[>1u\033[?1007h\033[?2004h\033[?1000h\033[?1002h\033[?1006h\033[?1015h\033[?1004h\033[?1h\033=\033[>4;2m\033[5 q\033[?25l`
	if code, _, errb := tendRun(t, tend, "-c", conf, "send", "shell:0", "--literal", "printf '"+set+"'; echo modes-$((6*7))", "--enter"); code != 0 {
		t.Fatalf("send: %d %s", code, errb)
	}
	a.shows("modes-42")
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Fatalf("detach: exit %d", code)
	}
	a.sent("[detached from shell:0]")
	a.mu.Lock()
	raw := a.raw.String()
	a.mu.Unlock()

	if !strings.HasPrefix(raw, "\x1b[?1049h") || strings.Count(raw, "\x1b[?1049h") != 1 || strings.Count(raw, "\x1b[?1049l") != 1 {
		t.Errorf("the caller's alternate screen: entered first and left once, the run's own switches taken out: %q", raw)
	}
	i := strings.LastIndex(raw, "modes-42")
	tail := raw[i:]
	if !strings.Contains(tail, "\x1b[?1049l[detached from shell:0]") {
		t.Errorf("the alternate screen is not left last: %q", tail)
	}
	for _, undo := range []struct{ what, seq string }{
		{"bracketed paste", "\x1b[?2004l"},
		{"mouse", "\x1b[?1000l"}, {"mouse buttons", "\x1b[?1002l"}, {"mouse motion", "\x1b[?1003l"},
		{"mouse SGR", "\x1b[?1006l"}, {"mouse urxvt", "\x1b[?1015l"},
		{"focus events", "\x1b[?1004l"},
		{"application cursor keys", "\x1b[?1l"}, {"application keypad", "\x1b>"},
		{"alternate scroll", "\x1b[?1007l"},
		{"modifyOtherKeys", "\x1b[>4m"},
		{"the kitty keyboard protocol's flags", "\x1b[=0;1u"}, {"the kitty keyboard protocol's stack", "\x1b[<99u"},
		{"cursor shape", "\x1b[0 q"}, {"cursor visibility", "\x1b[?25h"},
	} {
		if !strings.Contains(tail, undo.seq) {
			t.Errorf("the detach does not undo %s (%q): %q", undo.what, undo.seq, tail)
		}
	}

	// The caller's screen, as it was before the attach, is what shows.
	scr := vt.NewScreen(vt.Size{Cols: 80, Rows: 24})
	scr.Feed([]byte("the caller's own screen\r\n$ tend attach shell:0\r\n"))
	scr.Feed([]byte(raw))
	if scr.AltScreen() || !strings.Contains(scr.Text(), "the caller's own screen") || strings.Contains(scr.Text(), "modes-42") {
		t.Errorf("after the detach the caller's terminal shows (alternate screen %v):\n%s", scr.AltScreen(), scr.Text())
	}
}

// TestAttachFollowsTheDaemon: an attach open across tend upgrade, and
// across a daemon killed and started again, says so in one line, waits,
// and goes on with the same run.
func TestAttachFollowsTheDaemon(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.shell]
command = ["sh"]
tty = true
env = { PS1 = "tend$ " }
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "shell:0")
	before := pids(t, c, "shell:0")
	keeper := keeperOf(t, dir)
	var a *ptyAttach
	attached := func() {
		t.Helper()
		testutil.Eventually(t, "the attach connected", func() bool {
			st, err := c.Status("shell:0")
			return err == nil && st.TTY != nil && st.TTY.Clients == 1
		})
		// The screen is painted again once the attach has its new
		// connection, over the line that said it was waiting.
		testutil.Eventually(t, "the screen painted again", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return !strings.Contains(a.scr.Text(), "waiting up to")
		})
	}

	a = startPTYAttach(t, tend, conf, 80, 24, "shell:0")
	attached()
	a.typed("echo $((40+2))\r")
	a.shows("42")

	replaceTend(t, tend, tend, "\n# the next build\n")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade"); code != 0 {
		t.Fatalf("tend upgrade: %d %s%s\n%s", code, out, errOut, stderr())
	}
	a.sent("waiting up to 1m0s for it to come back")
	attached()
	a.typed("echo $((50+5))\r")
	a.shows("55")

	killUp(t, up, up.Process.Pid, before)
	orphaned(t, keeper)
	testutil.Eventually(t, "a second line", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return strings.Count(a.raw.String(), "waiting up to") == 2
	})
	up = startUp(t, tend, conf)
	waitRunning(t, c, "shell:0")
	attached()
	a.typed("echo $((60+6))\r")
	a.shows("66")
	if after := pids(t, c, "shell:0"); after["shell:0"] != before["shell:0"] {
		t.Errorf("the run changed: %v, %v", before, after)
	}
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Errorf("detach after the restarts: exit %d", code)
	}
	a.mu.Lock()
	raw := a.raw.String()
	a.mu.Unlock()
	if strings.Contains(raw, "websocket") || strings.Contains(raw, "broke") && !strings.Contains(raw, "waiting up to") {
		t.Errorf("a raw connection error: %q", raw)
	}
	downAndGone(t, c, up, before)
	testutil.Eventually(t, "the keeper to go", func() bool { return !testutil.Alive(keeper) })
}

// TestSendToVim: --literal types text as keystrokes, so :q! quits vim
// (pasted, vim would insert it), and --keys items that are no key names
// are typed as written (--keys ':set nu',Enter numbers the lines).
func TestSendToVim(t *testing.T) {
	if _, err := exec.LookPath("vim"); err != nil {
		t.Skip("no vim")
	}
	dir, err := os.MkdirTemp("", "tendvim") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tend := tendBinary(t)
	file := filepath.Join(dir, "text")
	write(t, file, "alpha\nbeta\n")
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(`[program.vim]
command = ["vim", "-u", "DEFAULTS", "-i", "NONE", "-n", %q]
tty = true
tty_size = "80x24"
restart = "never"
`, file))
	up, log := startUpLogged(t, tend, conf)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	testutil.Eventually(t, "the daemon", func() bool { _, err := c.Health(); return err == nil || up.ProcessState != nil })
	if up.ProcessState != nil {
		t.Fatalf("tend up ended: %s", log())
	}
	waitRunning(t, c, "vim:0")
	screenShows(t, c, "vim:0", "alpha")

	if code, _, errb := tendRun(t, tend, "-c", conf, "send", "vim:0", "--keys", ":set nu,Enter"); code != 0 {
		t.Fatalf("send --keys: %d %s", code, errb)
	}
	screenShows(t, c, "vim:0", "  1 alpha\n  2 beta")

	if code, _, errb := tendRun(t, tend, "-c", conf, "send", "vim:0", "--literal", ":q!", "--enter"); code != 0 {
		t.Fatalf("send --literal: %d %s", code, errb)
	}
	var last string
	testutil.Eventually(t, "vim to quit", func() bool {
		st, err := c.Status("vim:0")
		last = fmt.Sprintf("%+v %v", st, err)
		var apiErr *client.APIError
		return err == nil && st.State != "running" || errors.As(err, &apiErr)
	}, testutil.Explain(func() string { return last }))
	if scr, err := c.Screen("vim:0", false); err == nil && strings.Contains(strings.Join(scr.Lines, "\n"), ":q!alpha") {
		t.Errorf(":q! was inserted, not typed:\n%s", strings.Join(scr.Lines, "\n"))
	}
}
