package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// ttyFleet is the fleet of TestTerminalProgramsEndToEnd; %s is its cgroup
// directory.
const ttyFleet = `[daemon]
cgroup = %q
forward_output = true

[program.py]
command = ["python3", "-i", "-q"]
tty = true
stop_signal = "HUP"

[program.color]
shell = '''printf '\033[31mred\033[0m text, %%s\n' "$TERM"; exec sleep 100031'''
tty = true
tty_size = "100x30"

[program.spinner]
shell = '''while :; do for c in a b c d; do printf '\r%%s thinking' $c; sleep 0.1; done; done'''
tty = true
agent = true
turn_idle_after = "1s"

[program.prompt]
shell = "printf 'ready> '; exec sleep 100032"
tty = true
agent = true
turn_idle_after = "1s"

[program.quiet]
shell = "printf 'quiet> '; exec sleep 100033"
tty = true
idle_output_timeout = "1s"
wedge_restart_grace = "1s"
`

// Programs with tty = true under the real binary: each run in its cgroup
// with a terminal, the logs as text and as bytes, forwarded as text, the
// status's tty object, the turns of terminal agents from their screens,
// idle_output_timeout; then tend up killed outright: the runs and their
// terminals outlive it (the keeper holds them), the next daemon adopts
// them, and tend down leaves nothing, the keeper included.
func TestTerminalProgramsEndToEnd(t *testing.T) {
	testutil.NeedTool(t, "python3")
	cg := testutil.CgroupDir(t)
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(ttyFleet, cg))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	var stdout syncBuffer
	up := startUpWith(t, tend, conf, func(cmd *exec.Cmd) { cmd.Stdout = &stdout })
	ids := []string{"py:0", "color:0", "spinner:0", "prompt:0", "quiet:0"}
	testutil.Eventually(t, "the fleet running", func() bool {
		for _, id := range ids {
			if st, err := c.Status(id); err != nil || st.State != program.StateRunning {
				return false
			}
		}
		return true
	}, testutil.Explain(func() string { _, out, _ := tendRun(t, tend, "ps", "-c", conf); return out }))

	// Logs: text, one line per line, without control sequences; --raw the bytes.
	logs := func(id string, args ...string) string {
		_, out, _ := tendRun(t, tend, append([]string{"logs", "-c", conf, id}, args...)...)
		return out
	}
	testutil.Eventually(t, "the logs", func() bool {
		return logs("color:0") == "red text, xterm-256color\n" && strings.Contains(logs("py:0"), ">>>")
	}, testutil.Explain(func() string { return logs("color:0") + logs("py:0") }))
	if raw := logs("color:0", "--raw"); raw != "\x1b[31mred\x1b[0m text, xterm-256color\r\n" {
		t.Errorf("--raw: %q", raw)
	}
	if got := logs("prompt:0"); got != "ready> \n" {
		t.Errorf("a prompt's log: %q", got)
	}
	testutil.Eventually(t, "forwarded text", func() bool { return strings.Contains(stdout.String(), "color:0 | red text, xterm-256color\n") },
		testutil.Explain(stdout.String))
	if strings.Contains(stdout.String(), "\x1b[31m") {
		t.Errorf("forward_output printed control sequences: %q", stdout.String())
	}

	// The status: the tty object, every run in its own cgroup.
	st, err := c.Status("color:0")
	if err != nil || st.TTY == nil || st.TTY.Cols != 100 || st.TTY.Rows != 30 || st.TTY.Clients != 0 || st.TTY.ScreenChangedAt.IsZero() {
		t.Fatalf("status %+v, %v", st.TTY, err)
	}
	group := filepath.Join(cg, "tend-"+statedir.ID(filepath.Join(dir, ".tend")), "color-0")
	if st.Tracking != program.TrackingCgroup || !slices.Contains(groupProcs(group), *st.PID) {
		t.Errorf("color:0 (pid %d) tracked by %q, its group holds %v", *st.PID, st.Tracking, groupProcs(group))
	}

	// Turns: the spinner's screen changes, the prompt's does not.
	testutil.Eventually(t, "the prompt idle", func() bool {
		st, err := c.Status("prompt:0")
		return err == nil && st.Lifecycle == program.LifecycleIdle && !st.TurnActive
	})
	for range 5 {
		if st, _ := c.Status("spinner:0"); st.Lifecycle != program.LifecycleRunning || !st.TurnActive {
			t.Fatalf("the spinner is %s (turn %v)", st.Lifecycle, st.TurnActive)
		}
	}
	// idle_output_timeout: a silent terminal is a wedged run.
	testutil.Eventually(t, "the quiet run wedged", func() bool {
		st, err := c.Status("quiet:0")
		return err == nil && st.Restarts.WedgeRestart >= 1
	})
	waitRunning(t, c, ids...)

	// tend up killed outright: the runs and the keeper go on.
	before := pids(t, c, ids...)
	keeper := keeperOf(t, dir)
	killUp(t, up, up.Process.Pid, before)
	orphaned(t, keeper)
	if !testutil.Alive(keeper) {
		t.Fatal("the keeper died with the daemon")
	}
	if cmdline(keeper) != "tend-keeper " {
		t.Errorf("the keeper's command line is %q", cmdline(keeper))
	}
	up = startUp(t, tend, conf)
	waitRunning(t, c, ids...)
	after := pids(t, c, ids...)
	for id, pid := range before {
		if after[id] != pid {
			t.Errorf("%s: pid %d before, %d after: not adopted", id, pid, after[id])
		}
	}
	if st, _ := c.Status("color:0"); st.TTY == nil || st.TTY.Cols != 100 {
		t.Errorf("the adopted run's tty %+v", st.TTY)
	}
	if got := keeperOf(t, dir); got != keeper {
		t.Errorf("keeper %d after, %d before", got, keeper)
	}
	downAndGone(t, c, up, after)
	testutil.Eventually(t, "the keeper to go", func() bool { return !testutil.Alive(keeper) })
	if _, err := os.Stat(filepath.Join(dir, ".tend", "keep.sock")); err == nil {
		t.Error("keep.sock left in the state dir after tend down")
	}
}

// keeperOf is the tend-keeper process serving dir's state dir: the pid its
// daemon recorded in keeper.pid (PID TICKS MAKER), a live process whose descriptor 3 is its
// socket. (/proc/net/unix cannot tell: the socket is bound through the
// state directory's descriptor, and named so.)
func keeperOf(t *testing.T, dir string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, ".tend", "keeper.pid"))
	f := strings.Fields(string(b))
	pid := 0
	if len(f) == 3 {
		pid, _ = strconv.Atoi(f[0])
	}
	if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3"); pid <= 0 || !strings.HasPrefix(l, "socket:") {
		t.Fatalf("no keeper serves %s (keeper.pid: %q)", dir, b)
	}
	return pid
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A tty run across tend upgrade and then a daemon killed outright: the
// same run goes on in the same terminal, and its log has every line it
// wrote, in order, none twice: the old daemon writes out what it read and
// stops reading, the terminal's master is handed over by inheritance, the
// new one reads on; the keeper still holds the master for the next daemon.
func TestUpgradeKeepsATerminal(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.ticker]
shell = "i=0; while :; do i=$((i+1)); printf 'tick %d\n' $i; sleep 0.005; done"
tty = true
`)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "ticker:0")
	before := pids(t, c, "ticker:0")
	keeper := keeperOf(t, dir)
	ticks := func() int {
		t.Helper()
		_, out, _ := tendRun(t, tend, "logs", "-c", conf, "ticker:0", "--raw", "-n", "100000")
		n := 0
		lines := strings.Split(out, "\r\n")
		lines = lines[:len(lines)-1] // what follows the last newline: "", or a line being written
		for _, line := range lines {
			n++
			if line != "tick "+strconv.Itoa(n) {
				t.Fatalf("line %d of the log is %q", n, line)
			}
		}
		return n
	}
	testutil.Eventually(t, "ticks before", func() bool { return ticks() > 50 })

	replaceTend(t, tend, tend, "\n# the next build\n")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade"); code != 0 {
		t.Fatalf("tend upgrade: %d %s%s\n%s", code, out, errOut, stderr())
	}
	n := ticks()
	testutil.Eventually(t, "ticks after the upgrade", func() bool { return ticks() > n+50 })
	if after := pids(t, c, "ticker:0"); after["ticker:0"] != before["ticker:0"] {
		t.Fatalf("the run changed across the upgrade: %v, %v", before, after)
	}
	if st, _ := c.Status("ticker:0"); st.TTY == nil || st.TTY.ScreenChangedAt.IsZero() {
		t.Errorf("tty after the upgrade: %+v", st.TTY)
	}
	if got := keeperOf(t, dir); got != keeper {
		t.Errorf("keeper %d after the upgrade, %d before", got, keeper)
	}

	killUp(t, up, up.Process.Pid, before)
	orphaned(t, keeper)
	up = startUp(t, tend, conf)
	waitRunning(t, c, "ticker:0")
	n = ticks()
	testutil.Eventually(t, "ticks after the daemon was killed", func() bool { return ticks() > n+50 })
	downAndGone(t, c, up, before)
	testutil.Eventually(t, "the keeper to go", func() bool { return !testutil.Alive(keeper) })
}
