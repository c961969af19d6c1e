package initproc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/initproc"
	"github.com/tend-sh/tend/internal/testutil"
)

// The test binary doubles as the init under test: with envArgv set, TestMain
// runs initproc.Run on the command it names and exits with its status, which
// is how tend's code becomes PID 1 of a fresh PID namespace (unshare) without
// the test process itself becoming a subreaper or catching every signal.
const (
	envArgv = "TEND_INITPROC_TEST_ARGV" // JSON argv for Run
	envGone = "TEND_INITPROC_TEST_GONE" // file of pids that must be gone when Run returns
	envFG   = "TEND_INITPROC_TEST_FG"   // "1": the terminal must be back in our group
)

// Harness exit statuses for a failed post-Run check.
const (
	exitLeftover = 99
	exitNoFG     = 98
)

func TestMain(m *testing.M) {
	if js := os.Getenv(envArgv); js != "" {
		var argv []string
		if err := json.Unmarshal([]byte(js), &argv); err != nil {
			fmt.Fprintln(os.Stderr, "harness:", err)
			os.Exit(3)
		}
		if os.Getenv(envFG) == "1" {
			// Like a container's init under docker run -t: lead a session
			// whose controlling terminal is stdin (and so its foreground).
			if _, err := unix.Setsid(); err != nil {
				fmt.Fprintln(os.Stderr, "harness: setsid:", err)
				os.Exit(3)
			}
			if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
				fmt.Fprintln(os.Stderr, "harness: TIOCSCTTY:", err)
				os.Exit(3)
			}
		}
		code := initproc.Run(argv, os.Stderr)
		if bad := postChecks(); bad != 0 {
			os.Exit(bad)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// postChecks runs in the harness after Run has returned.
func postChecks() int {
	if f := os.Getenv(envGone); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "harness:", err)
			return exitLeftover
		}
		for _, pid := range strings.Fields(string(b)) {
			if _, err := os.Stat("/proc/" + pid); err == nil {
				stat, _ := os.ReadFile("/proc/" + pid + "/stat")
				fmt.Fprintf(os.Stderr, "harness: pid %s left behind: %s\n", pid, stat)
				return exitLeftover
			}
		}
	}
	if os.Getenv(envFG) == "1" {
		pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
		if err != nil || pgrp != syscall.Getpgrp() {
			fmt.Fprintf(os.Stderr, "harness: terminal foreground %d (%v), want %d\n", pgrp, err, syscall.Getpgrp())
			return exitNoFG
		}
	}
	return 0
}

var (
	unshareOnce sync.Once
	unshareErr  error
)

// needUnshare skips the test where a PID namespace cannot be made.
func needUnshare(t *testing.T) {
	t.Helper()
	unshareOnce.Do(func() {
		out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput()
		if err != nil {
			unshareErr = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
	})
	if unshareErr != nil {
		t.Skipf("needs `unshare --pid --fork --mount-proc` (root): %v", unshareErr)
	}
}

// harness is one run of the test binary as init, inside a new PID namespace
// or (ns false) as an ordinary child subreaper.
type harness struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // written by exec's copier until done is closed
	done   chan struct{}
	err    error // cmd.Wait's result; read after done
}

// startInit starts the harness running Run(argv) with dir as $D. It leads
// its own process group, which t.Cleanup SIGKILLs if it is still running;
// inside a namespace that takes everything with it (PID 1 dies).
func startInit(t *testing.T, ns bool, dir string, argv []string, env ...string) *harness {
	t.Helper()
	js, err := json.Marshal(argv)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{done: make(chan struct{})}
	args := []string{bin, "-test.run=^$"}
	if ns {
		args = append([]string{"unshare", "--pid", "--fork", "--mount-proc"}, args...)
	}
	h.cmd = exec.Command(args[0], args[1:]...)
	h.cmd.Env = append(os.Environ(), append(env, envArgv+"="+string(js), "D="+dir)...)
	h.cmd.Stderr = &h.stderr
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return h.launch(t)
}

func (h *harness) launch(t *testing.T) *harness {
	t.Helper()
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	pid := h.cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the group we started, by its pid
			<-h.done
		}
	})
	return h
}

// wait returns the harness's exit status.
func (h *harness) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("init did not exit; stderr:\n%s", h.stderr.String())
	}
	var ee *exec.ExitError
	if h.err != nil && !errors.As(h.err, &ee) {
		t.Fatalf("wait: %v", h.err)
	}
	return h.cmd.ProcessState.ExitCode()
}

// initPID is the pid (in our namespace) of the namespace's PID 1: the only
// child of the unshare process.
func (h *harness) initPID(t *testing.T) int {
	t.Helper()
	pid := h.cmd.Process.Pid
	f := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	n := 0
	testutil.Eventually(t, "unshare to fork init", func() bool {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("finding init: %v", err)
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if n, err = strconv.Atoi(fs[0]); err != nil {
				t.Fatal(err)
			}
		}
		return n > 0
	})
	return n
}

// waitFile waits for the child to create path (its "ready" mark).
func waitFile(t *testing.T, h *harness, path string) {
	t.Helper()
	testutil.Eventually(t, path+" to appear", func() bool {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-h.done:
			t.Fatalf("init exited before %s appeared; stderr:\n%s", path, h.stderr.String())
		default:
		}
		return false
	})
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestExitCode(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	h := startInit(t, true, t.TempDir(), sh("exit 7"))
	if got := h.wait(t); got != 7 {
		t.Fatalf("exit status %d, want 7; stderr:\n%s", got, h.stderr.String())
	}
}

func TestKilledBySignal(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	h := startInit(t, true, t.TempDir(), sh("kill -KILL $$"))
	if got := h.wait(t); got != 128+9 {
		t.Fatalf("exit status %d, want 137; stderr:\n%s", got, h.stderr.String())
	}
}

func TestForwardsTermToChild(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	dir := t.TempDir()
	h := startInit(t, true, dir, sh(`touch "$D/ready"; exec sleep 1000`))
	waitFile(t, h, filepath.Join(dir, "ready"))
	if err := syscall.Kill(h.initPID(t), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := h.wait(t); got != 128+15 {
		t.Fatalf("exit status %d, want 143; stderr:\n%s", got, h.stderr.String())
	}
}

func TestForwardsUSR1(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	dir := t.TempDir()
	h := startInit(t, true, dir, sh(`trap 'echo got > "$D/usr1"; exit 0' USR1
touch "$D/ready"
while :; do sleep 0.05; done`))
	waitFile(t, h, filepath.Join(dir, "ready"))
	if err := syscall.Kill(h.initPID(t), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if got := h.wait(t); got != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", got, h.stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "usr1")); err != nil || string(b) != "got\n" {
		t.Fatalf("child's USR1 trap did not run: %q, %v", b, err)
	}
}

// orphanScript double-forks short sleeps, checks that one of them was
// reparented to wantPPID, then, once they have all exited, that no zombie is
// left: none at all in the namespace as PID 1 (all), none of tend's outside
// one (the host may have zombies of its own). Exit 2: not reparented; 1: a
// zombie or the orphan still there.
func orphanScript(wantPPID string, all bool) string {
	zombies := `awk -v p="$want_ppid" '$3 == "Z" && $4 == p' /proc/[0-9]*/stat 2>/dev/null`
	if all {
		zombies = `awk '$3 == "Z"' /proc/[0-9]*/stat 2>/dev/null`
	}
	return "want_ppid=" + wantPPID + `
for i in 1 2 3 4 5; do ( sleep 0.1 & ) ; done
( sleep 3 & echo $! > "$D/orphan" )
o=$(cat "$D/orphan")
i=0 # the subshell has exited; its child is reparented soon after (a loaded machine may take a while)
while ppid=$(cut -d' ' -f4 "/proc/$o/stat") && [ "$ppid" != "$want_ppid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
[ "$ppid" = "$want_ppid" ] || { echo "orphan $o has ppid $ppid, want $want_ppid" >&2; exit 2; }
while [ -e "/proc/$o" ] && [ "$(cut -d' ' -f3 "/proc/$o/stat" 2>/dev/null)" != "Z" ]; do sleep 0.1; done
sleep 0.5
z=$(` + zombies + `)
[ -z "$z" ] || { echo "zombies: $z" >&2; exit 1; }
[ ! -e "/proc/$o" ] || { echo "orphan $o still there" >&2; exit 1; }
exit 0
`
}

func TestReapsOrphansAsPID1(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	h := startInit(t, true, t.TempDir(), sh(orphanScript("1", true)))
	if got := h.wait(t); got != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", got, h.stderr.String())
	}
}

// Not PID 1: the orphans must come to tend (a child subreaper, and the
// child's parent: $PPID) instead of the real init.
func TestReapsOrphansAsSubreaper(t *testing.T) {
	t.Parallel()
	h := startInit(t, false, t.TempDir(), sh(orphanScript("$PPID", false)))
	if got := h.wait(t); got != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", got, h.stderr.String())
	}
}

// TestStopsLeftoverGroup: the child exits leaving two members of its group,
// one that exits on SIGTERM and one that ignores it; Run must return the
// child's status only after both are gone (the harness checks /proc).
func TestStopsLeftoverGroup(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	dir := t.TempDir()
	h := startInit(t, true, dir, sh(`
sh -c 'trap "echo term > \"$D/term\"; exit 0" TERM; touch "$D/r1"; while :; do sleep 0.05; done' &
echo $! > "$D/pids"
sh -c 'trap "" TERM; touch "$D/r2"; exec sleep 1000' &
echo $! >> "$D/pids"
while [ ! -e "$D/r1" ] || [ ! -e "$D/r2" ]; do sleep 0.01; done
exit 4`), envGone+"="+filepath.Join(dir, "pids"))
	if got := h.wait(t); got != 4 {
		t.Fatalf("exit status %d, want 4 (99: a straggler survived); stderr:\n%s", got, h.stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "term")); err != nil || string(b) != "term\n" {
		t.Fatalf("straggler got no SIGTERM before SIGKILL: %q, %v", b, err)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noExec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
		code int
		msg  string
	}{
		{"not on PATH", []string{"tend-no-such-command-xyz"}, nil, 127, "tend-no-such-command-xyz: command not found"},
		{"no such path", []string{filepath.Join(dir, "missing")}, nil, 127, "no such file or directory"},
		{"not executable", []string{noExec}, nil, 126, "permission denied"},
		{"not executable on PATH", []string{"noexec"}, []string{"PATH=" + dir}, 126, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startInit(t, false, dir, tc.argv, tc.env...)
			if got := h.wait(t); got != tc.code {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", got, tc.code, h.stderr.String())
			}
			if s := h.stderr.String(); !strings.Contains(s, "tend init: ") || !strings.Contains(s, tc.msg) {
				t.Fatalf("stderr %q, want a line with %q", s, tc.msg)
			}
		})
	}
}

func TestNoCommand(t *testing.T) {
	var buf bytes.Buffer
	if got := initproc.Run(nil, &buf); got != 2 || !strings.Contains(buf.String(), "no command") {
		t.Fatalf("Run(nil) = %d, %q", got, buf.String())
	}
}

// TestTerminalForeground runs init as PID 1 leading a session on a
// pseudo-terminal, as docker run -t makes it: the child must get the
// terminal's foreground (or an interactive command would stop on its first
// read), and init must take it back afterwards.
func TestTerminalForeground(t *testing.T) {
	needUnshare(t)
	t.Parallel()
	ptmx, pts := openPTY(t)
	defer ptmx.Close()
	defer pts.Close()
	js, _ := json.Marshal(sh(`set -- $(cat /proc/$$/stat)
[ "$5" = "$8" ] || { echo "pgrp $5, terminal foreground $8" >&2; exit 1; }`))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{done: make(chan struct{})}
	h.cmd = exec.Command("unshare", "--pid", "--fork", "--mount-proc", bin, "-test.run=^$")
	h.cmd.Env = append(os.Environ(), envArgv+"="+string(js), envFG+"=1")
	h.cmd.Stdin = pts
	h.cmd.Stderr = &h.stderr
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	h.launch(t)
	if got := h.wait(t); got != 0 {
		t.Fatalf("exit status %d, want 0 (98: terminal not reclaimed); stderr:\n%s", got, h.stderr.String())
	}
}

// TestTerminalNotOurs: stdin is a terminal but not tend's controlling one;
// the child starts normally, without being handed a foreground.
func TestTerminalNotOurs(t *testing.T) {
	t.Parallel()
	ptmx, pts := openPTY(t)
	defer ptmx.Close()
	defer pts.Close()
	js, _ := json.Marshal(sh("exit 5"))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{done: make(chan struct{})}
	h.cmd = exec.Command(bin, "-test.run=^$")
	h.cmd.Env = append(os.Environ(), envArgv+"="+string(js))
	h.cmd.Stdin = pts
	h.cmd.Stderr = &h.stderr
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h.launch(t)
	if got := h.wait(t); got != 5 {
		t.Fatalf("exit status %d, want 5; stderr:\n%s", got, h.stderr.String())
	}
}

// openPTY opens a pseudo-terminal pair, skipping the test where there is none.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	ptmx = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		ptmx.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		ptmx.Close()
		t.Skipf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Skipf("open pts: %v", err)
	}
	return ptmx, pts
}

func TestForwardedSignals(t *testing.T) {
	got := initproc.Forwarded()
	for _, s := range []syscall.Signal{syscall.SIGURG, syscall.SIGCHLD, syscall.SIGKILL, syscall.SIGSTOP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPROF, 32, 33, 34} {
		if slices.Contains(got, os.Signal(s)) {
			t.Errorf("forwards %v", s)
		}
	}
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGCONT,
		syscall.SIGWINCH, syscall.SIGABRT, 35, 64} {
		if !slices.Contains(got, os.Signal(s)) {
			t.Errorf("does not forward %v", s)
		}
	}
}
