package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// The test binary is also a daemon of its own, for the tests that kill one
// outright: TEND_DAEMON_TEST_UP names its config.
func TestMain(m *testing.M) {
	roles.Be() // the shim or the keeper, when this binary is re-executed as one
	if conf := os.Getenv("TEND_DAEMON_TEST_UP"); conf != "" {
		err := Run(context.Background(), Options{ConfigPath: conf, Stderr: os.Stderr})
		if err != nil {
			fmt.Fprintln(os.Stderr, "tend up:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startDaemonSeen is startDaemon, with the daemon itself for the test.
func startDaemonSeen(t *testing.T, dir, config string) (*client.Client, *daemon, func()) {
	t.Helper()
	seen := make(chan *daemon, 1)
	testStarted = func(d *daemon) { seen <- d }
	defer func() { testStarted = nil }()
	c, stop := startDaemon(t, dir, config)
	return c, <-seen, stop
}

// screenText is id's screen, one line per row, trailing blank rows left out.
func screenText(t *testing.T, d *daemon, id string) string {
	t.Helper()
	s, err := d.terminals.Screen(id, false, 0)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimRight(strings.Join(s.Lines, "\n"), "\n")
}

func waitScreen(t *testing.T, d *daemon, id, want string) {
	t.Helper()
	testutil.Eventually(t, id+"'s screen to show "+strconv.Quote(want), func() bool {
		return strings.Contains(screenText(t, d, id), want)
	}, testutil.Explain(func() string { return screenText(t, d, id) }))
}

// ttyLogs is what `tend logs ID` prints (raw: --raw).
func ttyLogs(t *testing.T, c *client.Client, id string, raw bool) string {
	t.Helper()
	return logsOf(t, c, id, client.LogOptions{Tail: 100000, Raw: raw})
}

const shellConf = `
[program.sh]
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "tend$ " }
stop_signal = "HUP"        # an interactive bash ignores TERM
tty = true
tty_size = "80x24"

[program.worker]
command = ["sleep", "1000"]
`

// A tty program under a real daemon: its screen, input typed into it, its
// log as text and as bytes, the status's tty object, and the refusals of
// the terminal verbs.
func TestTerminalsOfADaemon(t *testing.T) {
	testutil.NeedTool(t, "bash")
	dir := t.TempDir()
	c, d, _ := startDaemonSeen(t, dir, shellConf)
	waitScreen(t, d, "sh:0", "tend$")
	if ids, err := d.terminals.Input("sh", program.Input{Text: "echo $((6*7)) $TERM", Enter: true}); err != nil || len(ids) != 1 {
		t.Fatalf("input: %v %v", ids, err)
	}
	waitScreen(t, d, "sh:0", "42 xterm-256color")
	if got := screenText(t, d, "sh:0"); !strings.HasPrefix(got, "tend$ echo $((6*7)) $TERM\n42 xterm-256color\ntend$") {
		t.Errorf("screen:\n%s", got)
	}
	// The keys of tmux: text, C-c, and a line typed after it.
	if _, err := d.terminals.Input("sh:0", program.Input{Text: "sleep 100", Keys: []string{"Enter"}}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status("sh:0")
	testutil.Eventually(t, "sleep to run in the foreground", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(*st.PID) + "/task/" + strconv.Itoa(*st.PID) + "/children")
		for _, kid := range strings.Fields(string(b)) {
			// pid (comm) state ppid pgrp session tty_nr tpgid
			if f := strings.Fields(readFile("/proc/" + kid + "/stat")); len(f) > 7 && f[1] == "(sleep)" && f[4] == f[7] {
				return true
			}
		}
		return false
	})
	if _, err := d.terminals.Input("sh:0", program.Input{Keys: []string{"C-c"}}); err != nil {
		t.Fatal(err)
	}
	// The interrupt flushes what is typed after it until bash reads again.
	testutil.Eventually(t, "the prompt after C-c", func() bool {
		return strings.HasSuffix(screenText(t, d, "sh:0"), "tend$ sleep 100\n^C\ntend$")
	}, testutil.Explain(func() string { return screenText(t, d, "sh:0") }))
	if _, err := d.terminals.Input("all", program.Input{Text: "printf 'a\\033[31mred\\033[0m\\n'", Enter: true}); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, d, "sh:0", "\nared\n")

	// Logs: text without control sequences, one line per line; --raw the bytes.
	testutil.Eventually(t, "the log", func() bool { return strings.Contains(ttyLogs(t, c, "sh:0", false), "\nared\n") })
	text := ttyLogs(t, c, "sh:0", false)
	if strings.Contains(text, "\x1b") || strings.Contains(text, "\r") || !strings.Contains(text, "tend$ echo $((6*7)) $TERM\n42 xterm-256color\n") {
		t.Errorf("logs as text:\n%q", text)
	}
	if raw := ttyLogs(t, c, "sh:0", true); !strings.Contains(raw, "a\x1b[31mred\x1b[0m\r\n") {
		t.Errorf("raw logs:\n%q", raw)
	}

	st, err := c.Status("sh:0")
	if err != nil || st.TTY == nil || st.TTY.Cols != 80 || st.TTY.Rows != 24 || st.TTY.ScreenChangedAt.IsZero() {
		t.Errorf("status tty %+v, %v", st.TTY, err)
	}
	if st, _ := c.Status("worker:0"); st.TTY != nil {
		t.Errorf("a program without tty has %+v", st.TTY)
	}

	// Refusals.
	_, err = d.terminals.Screen("worker:0", false, 0)
	if !errors.Is(err, program.ErrNotTerminal) || err.Error() != "worker:0 is not a terminal program (tty = false)" {
		t.Errorf("screen of worker:0: %v", err)
	}
	if _, err := d.terminals.Input("worker", program.Input{Text: "x"}); !errors.Is(err, program.ErrNotTerminal) {
		t.Errorf("input to worker: %v", err)
	}
	if _, err := d.terminals.Attach("worker:0", true); !errors.Is(err, program.ErrNotTerminal) {
		t.Errorf("attach to worker:0: %v", err)
	}
	if _, err := d.terminals.Screen("nope:0", false, 0); !errors.Is(err, program.ErrNotFound) {
		t.Errorf("screen of nope:0: %v", err)
	}
	if _, err := d.terminals.Input("sh:0", program.Input{Text: strings.Repeat("x", program.MaxInput+1)}); !errors.Is(err, program.ErrTooLarge) {
		t.Errorf("input too large: %v", err)
	}

	// An ended run: its last screen, not running; input says why.
	if _, err := c.Stop("sh:0"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "sh:0 stopped", func() bool { st, _ := c.Status("sh:0"); return st.State == program.StateStopped })
	s, err := d.terminals.Screen("sh:0", false, 0)
	if err != nil || s.Running || !strings.Contains(strings.Join(s.Lines, "\n"), "42 xterm-256color") {
		t.Errorf("the ended run's screen: %+v %v", s, err)
	}
	_, err = d.terminals.Input("sh:0", program.Input{Text: "x"})
	if !errors.Is(err, program.ErrNotRunning) || !strings.Contains(err.Error(), "sh:0 is not running (stopped): stopped by the operator") {
		t.Errorf("input to a stopped instance: %v", err)
	}
	if _, err := d.terminals.Attach("sh:0", false); !errors.Is(err, program.ErrNotRunning) {
		t.Errorf("attach to a stopped instance: %v", err)
	}
}

// A tty run with idle_output_timeout is wedged when its terminal is
// silent, and not while it writes; and with cgroups it runs in its own
// group like any run.
func TestTerminalIdleOutputAndContainment(t *testing.T) {
	dir := t.TempDir()
	c, d, _ := startDaemonSeen(t, dir, `
[program.quiet]
shell = "printf 'ready> '; exec sleep 1000"
tty = true
idle_output_timeout = "1s"
wedge_restart_grace = "1s"

[program.chatty]
shell = "while :; do printf 'tick\n'; sleep 0.2; done"
tty = true
idle_output_timeout = "1s"
`)
	testutil.Eventually(t, "the quiet run wedged", func() bool {
		st, err := c.Status("quiet:0")
		return err == nil && st.Restarts.WedgeRestart >= 1
	})
	if st, _ := c.Status("chatty:0"); st.Restarts.WedgeRestart != 0 || st.Run != 1 {
		t.Errorf("the chatty run was restarted: %+v", st.Restarts)
	}
	waitScreen(t, d, "quiet:0", "ready>")
	if d.cgroups == nil {
		t.Log("no cgroups here: containment not checked")
		return
	}
	st, _ := c.Status("chatty:0")
	g := d.groupOf("chatty:0")
	b, err := os.ReadFile(filepath.Join(g.Path(), "cgroup.procs"))
	if err != nil || !strings.Contains(" "+strings.Join(strings.Fields(string(b)), " ")+" ", " "+strconv.Itoa(*st.PID)+" ") {
		t.Errorf("the tty run %d is not in its group %s: %q %v", *st.PID, g.Path(), b, err)
	}
	if st.Tracking != program.TrackingCgroup {
		t.Errorf("tracking %q", st.Tracking)
	}
}

// A tty run outlives a daemon killed outright, with its terminal: the run
// writes more than the terminal holds while no daemon runs (and blocks,
// losing nothing), and the next daemon adopts it with its screen, as a
// terminal fed every byte would show it, and its log has every byte.
func TestTerminalOutlivesTheDaemon(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	conf := `
[program.agent]
shell = '''printf '\033[2J\033[Hfirst screen\n\033[1mbold\033[0m\n'
while [ ! -e ` + gate + ` ]; do sleep 0.05; done
i=0; while [ $i -lt 3000 ]; do printf 'meanwhile %d\n' $i; i=$((i+1)); done
printf 'END> '
exec sleep 100000'''
tty = true
tty_size = "60x10"
`
	c, killUp := upChild(t, dir, conf)
	defer killUp()
	var pid int
	testutil.Eventually(t, "the first daemon's run", func() bool {
		st, err := c.Status("agent:0")
		if err != nil || st.PID == nil {
			return false
		}
		pid = *st.PID
		return strings.Contains(ttyLogs(t, c, "agent:0", false), "bold")
	})
	kp := keeperPID(t, dir)
	killUp()
	// Orphaned to this process now: if the test ends before a daemon stops
	// them, they are ended and reaped here (after that daemon's stop).
	reapAtEnd(t, pid, kp)
	if !testutil.Alive(pid) || !testutil.Alive(kp) {
		t.Fatalf("the run (%v) or the keeper (%v) died with the daemon", testutil.Alive(pid), testutil.Alive(kp))
	}
	os.WriteFile(gate, nil, 0o600)
	// The keeper reads the run while no daemon runs: it writes it all
	// and goes on to its last command.
	testutil.Eventually(t, "the run to write all while no daemon runs", func() bool {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return string(comm) == "sleep\n"
	}, testutil.Explain(func() string { w, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan"); return string(w) }))

	c2, d, _ := startDaemonSeen(t, dir, conf)
	if st, err := c2.Status("agent:0"); err != nil || st.PID == nil || *st.PID != pid {
		t.Fatalf("not adopted: %+v %v", st, err)
	}
	waitScreen(t, d, "agent:0", "END>")
	want := "\x1b[2J\x1b[Hfirst screen\r\n\x1b[1mbold\x1b[0m\r\n"
	for i := range 3000 {
		want += "meanwhile " + strconv.Itoa(i) + "\r\n"
	}
	want += "END> "
	var raw string
	testutil.Eventually(t, "the log to hold every byte", func() bool {
		raw = ttyLogs(t, c2, "agent:0", true)
		return raw == want
	}, testutil.Explain(func() string {
		return fmt.Sprintf("the log has %d bytes, want %d; it ends %q", len(raw), len(want), raw[max(0, len(raw)-200):])
	}))
	s := vt.NewScreen(vt.Size{Cols: 60, Rows: 10})
	s.Feed([]byte(want))
	if got := screenText(t, d, "agent:0"); got != strings.TrimRight(s.Text(), "\n") {
		t.Errorf("the adopted screen\n%s\nwant\n%s", got, s.Text())
	}
	if got := keeperPID(t, dir); got != kp {
		t.Errorf("the keeper is %d, was %d", got, kp)
	}
}

// keeperPID is the keeper serving dir's state dir: the pid its daemon
// recorded (keeper.PIDFile), a live process whose descriptor 3 is its
// socket. (/proc/net/unix cannot tell: the socket is bound through the
// state directory's descriptor, and named so.)
func keeperPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".tend", keeper.PIDFile))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pid := 0
	if len(f) == 3 {
		pid, _ = strconv.Atoi(f[0])
	}
	if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3"); pid <= 0 || !strings.HasPrefix(l, "socket:") {
		t.Fatalf("no keeper: %s records %q", keeper.PIDFile, b)
	}
	return pid
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// upChild runs tend up on conf (written to dir/tend.toml) as a child of
// this test binary (TestMain's TEND_DAEMON_TEST_UP), in a process group of
// its own; killUp SIGKILLs it, as a crash would, and waits for it.
func upChild(t *testing.T, dir, conf string) (c *client.Client, killUp func()) {
	t.Helper()
	path := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	up := exec.Command(os.Args[0], "-test.run=^$")
	up.Env = append(os.Environ(), "TEND_DAEMON_TEST_UP="+path)
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan struct{})
	go func() { up.Wait(); close(upDone) }()
	var once sync.Once
	killUp = func() { once.Do(func() { syscall.Kill(up.Process.Pid, syscall.SIGKILL) }); <-upDone }
	return client.New(filepath.Join(dir, ".tend", SocketName)), killUp
}

// reapAtEnd ends and reaps pids (orphaned to this process by a killed
// daemon) when the test ends, unless a daemon's stop got there first.
func reapAtEnd(t *testing.T, pids ...int) {
	for _, p := range pids {
		t.Cleanup(func() {
			var ws syscall.WaitStatus
			if got, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil); err != nil || got == p {
				return
			}
			syscall.Kill(p, syscall.SIGKILL)
			syscall.Wait4(p, &ws, 0, nil)
		})
	}
}
