package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// ttySizeIs waits for id's terminal to be cols x rows with n clients, as
// the status says it.
func ttySizeIs(t *testing.T, c *client.Client, id string, cols, rows, n int) {
	t.Helper()
	testutil.Eventually(t, id+"'s terminal at the size", func() bool {
		st, err := c.Status(id)
		return err == nil && st.TTY != nil && st.TTY.Cols == cols && st.TTY.Rows == rows && st.TTY.Clients == n
	}, testutil.Explain(func() string {
		st, _ := c.Status(id)
		b, _ := json.Marshal(st.TTY)
		return string(b)
	}))
}

// TestTerminalSizeAfterDetach: attached clients size the terminal, the
// latest one's size wins, and when that one detaches the other's is
// back; when the last detaches, the terminal is tty_size (120x40 here)
// again, for `tend screen`, for the program and for the next run.
func TestTerminalSizeAfterDetach(t *testing.T) {
	tend, conf, c := terminalFleet(t)
	screenShows(t, c, "twice:0", "twice$")

	a := startPTYAttach(t, tend, conf, 70, 20, "twice:0")
	a.shows("twice$")
	ttySizeIs(t, c, "twice:0", 70, 20, 1)
	b := startPTYAttach(t, tend, conf, 90, 30, "twice:0")
	b.shows("twice$")
	ttySizeIs(t, c, "twice:0", 90, 30, 2)
	b.typed("\x10\x11")
	if code := b.exit(); code != 0 {
		t.Errorf("detach: exit %d", code)
	}
	ttySizeIs(t, c, "twice:0", 70, 20, 1) // a's, the latest still attached
	a.typed("\x10\x11")
	if code := a.exit(); code != 0 {
		t.Errorf("detach: exit %d", code)
	}
	ttySizeIs(t, c, "twice:0", 120, 40, 0)

	code, out, errb := tendRun(t, tend, "-c", conf, "screen", "twice:0", "--json")
	var scr struct{ Cols, Rows int }
	if err := json.Unmarshal([]byte(out), &scr); code != 0 || err != nil || scr.Cols != 120 || scr.Rows != 40 {
		t.Errorf("tend screen --json: exit %d, %+v %v %s", code, scr, err, errb)
	}
	tendRun(t, tend, "-c", conf, "send", "twice:0", "clear; stty size", "--enter")
	screenShows(t, c, "twice:0", "40 120")

	// The next run is tty_size too.
	if code, _, errb := tendRun(t, tend, "-c", conf, "restart", "twice:0"); code != 0 {
		t.Fatalf("restart: %d %s", code, errb)
	}
	waitRunning(t, c, "twice:0")
	screenShows(t, c, "twice:0", "twice$")
	tendRun(t, tend, "-c", conf, "send", "twice:0", "echo next run $(stty size)", "--enter")
	screenShows(t, c, "twice:0", "next run 40 120")
	ttySizeIs(t, c, "twice:0", 120, 40, 0)
}

// TestScreenOfARunEndedBeforeARestart: `tend screen` prints the last
// screen of a tty run that ended before the daemon was killed outright
// (exit 0), and of one that ended while no daemon ran, rebuilt by the
// next daemon from the runs' logs; and a run adopted with no client
// attached is back at tty_size, whatever size the last client left.
func TestScreenOfARunEndedBeforeARestart(t *testing.T) {
	becomeSubreaper(t)
	dir, err := os.MkdirTemp("", "tendtty") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.ended]
shell = '''printf 'last \033[1mwords\033[0m\nended> '; exit 3'''
tty = true
restart = "never"

[program.dies]
shell = '''printf 'dying words\n'; exec sleep 100000'''
tty = true
restart = "never"

[program.stays]
shell = '''trap 'echo "size $(stty size)"' WINCH; echo "size $(stty size)"; while :; do sleep 0.1; done'''
tty = true
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "dies:0", "stays:0")
	screenShows(t, c, "dies:0", "dying words")
	screenShows(t, c, "stays:0", "size 40 120")
	// A client sizes stays:0 and is still attached when the daemon dies.
	a := startPTYAttach(t, tend, conf, 70, 20, "stays:0")
	ttySizeIs(t, c, "stays:0", 70, 20, 1)
	screenShows(t, c, "stays:0", "size 20 70")
	testutil.Eventually(t, "ended:0 to have exited", func() bool {
		st, err := c.Status("ended:0")
		return err == nil && st.State == program.StateExited
	})
	// The journal of the intent record is written at once (not synced).
	testutil.Eventually(t, "the intent record of the ended run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, ".tend", "intent.json.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"id":"ended:0"`) && strings.Contains(l, `"last_start"`) {
				return true
			}
		}
		return false
	})
	runs := pids(t, c, "dies:0", "stays:0")
	kp := keeperOf(t, dir)
	killUp(t, up, up.Process.Pid, runs)
	orphaned(t, kp)
	syscall.Kill(runs["dies:0"], syscall.SIGKILL) // it ends while no daemon runs

	a.cmd.Process.Kill() // whether it ends or waits for the next daemon
	<-a.done

	startUp(t, tend, conf) // stopped at the test's end
	testutil.Eventually(t, "the next daemon", func() bool { _, err := c.Health(); return err == nil })
	// No client is attached to the adopted run: tty_size again.
	ttySizeIs(t, c, "stays:0", 120, 40, 0)
	screenShows(t, c, "stays:0", "size 20 70\nsize 40 120")
	for id, want := range map[string]string{"ended:0": "last words\nended>", "dies:0": "dying words"} {
		var code int
		var out, errb string
		testutil.Eventually(t, "tend screen "+id, func() bool {
			code, out, errb = tendRun(t, tend, "-c", conf, "screen", id)
			return code == 0 && strings.HasPrefix(out, want)
		}, testutil.Explain(func() string { return fmt.Sprintf("exit %d\n%s%s", code, out, errb) }))
	}
	code, out, _ := tendRun(t, tend, "-c", conf, "screen", "ended:0", "--json")
	var scr struct {
		Cols, Rows int
		Running    bool
	}
	if err := json.Unmarshal([]byte(out), &scr); code != 0 || err != nil || scr.Running || scr.Cols != 120 || scr.Rows != 40 {
		t.Errorf("tend screen --json: exit %d, %+v %v", code, scr, err)
	}
}
