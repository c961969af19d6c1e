package keeper

import (
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

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestMain(m *testing.M) {
	MaybeServe() // this binary re-executed as the keeper (startKeeper)
	os.Exit(m.Run())
}

// notes records what a keeper told its daemon unasked.
type notes struct {
	mu     sync.Mutex
	wrote  int
	healed int
	ended  []Run
	failed []Failed
}

func (n *notes) notices() Notices {
	return Notices{
		Wrote:  func(string) { n.mu.Lock(); n.wrote++; n.mu.Unlock() },
		Ended:  func(r Run) { n.mu.Lock(); n.ended = append(n.ended, r); n.mu.Unlock() },
		Failed: func(f Failed) { n.mu.Lock(); n.failed = append(n.failed, f); n.mu.Unlock() },
		Healed: func(string) { n.mu.Lock(); n.healed++; n.mu.Unlock() },
	}
}

func (n *notes) endedRuns() []Run {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.ended)
}

// startKeeper runs this test binary as a keeper on a new socket in a new
// state directory, as the daemon does, and returns it with a connection to
// it, as the daemon that started it would make.
func startKeeper(t *testing.T) (*exec.Cmd, Socket, *Client, <-chan error) {
	kp, sock, c, done, _, _ := startKeeperIn(t)
	return kp, sock, c, done
}

func startKeeperIn(t *testing.T) (*exec.Cmd, Socket, *Client, <-chan error, *statedir.Dir, *notes) {
	t.Helper()
	sd := testutil.StateDir(t)
	sock := At(sd)
	lfd, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	l := os.NewFile(uintptr(lfd), "listener")
	defer l.Close()
	dfd, err := unix.Dup(sd.FD())
	if err != nil {
		t.Fatal(err)
	}
	d := os.NewFile(uintptr(dfd), "state dir")
	defer d.Close()
	exe, _ := os.Executable()
	cmd := &exec.Cmd{Path: exe, Args: []string{Arg0}, Env: Env(), ExtraFiles: []*os.File{l, d},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	n := &notes{}
	c, held, err := Dial(sock, n.notices(), cmd.Process.Pid, os.Getpid()) // this process made the socket: until the keeper listens again, it is the peer
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 0 || c.Old() {
		t.Fatalf("a new keeper holds %d, version %d", len(held), c.Version())
	}
	t.Cleanup(c.Close)
	return cmd, sock, c, done, sd, n
}

// startInTTY starts script under sh in a new pty and returns the master
// and the run, for a keeper to read.
func startInTTY(t *testing.T, script string) (*os.File, Run, <-chan struct{}) {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command("/bin/sh", "-c", script)
	run.Stdin, run.Stdout, run.Stderr = s, s, s
	run.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	waited := make(chan struct{})
	go func() { run.Wait(); close(waited) }()
	t.Cleanup(func() { run.Process.Kill(); <-waited; m.Close() })
	ticks, err := reaper.StartTicks(run.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return m, Run{ID: "agent:0", PID: run.Process.Pid, Ticks: ticks}, waited
}

// ttyBytes is what a log holds of stream tty, as the run wrote it.
func ttyBytes(t *testing.T, sd *statedir.Dir, base string) string {
	t.Helper()
	logs, err := sd.Sub("logs")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var b []byte
	cur, err := logfile.Read([]logfile.Source{{ID: "x", Log: logfile.New(logs, base, logfile.Options{})}}, logfile.Query{Tail: -1}, func(e *logfile.Entry) error {
		if e.Stream == logfile.TTY {
			b = append(b, e.Line...)
			if !e.Partial {
				b = append(b, '\n')
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cur.Close()
	return string(b)
}

var testLog = LogSpec{Base: "agent-0", MaxSize: 1 << 20, MaxFiles: 2}

// The keeper reads a run's terminal while no daemon is connected (the run
// never blocks), appends every byte to the run's log, tells the daemon of
// the moment it wrote, and when every slave is closed says the run ended
// once all of it is written.
func TestKeeperReadsIntoTheLog(t *testing.T) {
	kp, sock, c, _, sd, _ := startKeeperIn(t)
	// 2 MiB, far more than a terminal holds: written while no daemon is
	// connected, it ends only if the keeper reads it.
	m, r, waited := startInTTY(t, `i=0; while [ $i -lt 16384 ]; do printf '%0127d\n' $i; i=$((i+1)); done; printf 'no newline'`)
	if err := c.Keep(r, testLog, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	m.Close() // the daemon dies: only the keeper's copy is left
	c.Close()
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		t.Fatal("the run blocked while no daemon was connected")
	}
	var want strings.Builder
	for i := range 16384 {
		fmt.Fprintf(&want, "%0127d\r\n", i)
	}
	want.WriteString("no newline")
	testutil.Eventually(t, "every byte in the log", func() bool {
		return ttyBytes(t, sd, testLog.Base) == want.String()
	}, testutil.Explain(func() string { return fmt.Sprintf("%d bytes of %d", len(ttyBytes(t, sd, testLog.Base)), want.Len()) }))

	// A daemon connected now hears of what is written, and of the end.
	n := &notes{}
	m2, r2, waited2 := startInTTY(t, `read x; echo "got $x"`)
	c2, held, err := Dial(sock, n.notices(), kp.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if len(held) != 0 {
		t.Fatalf("the ended run's master is still held: %v", held)
	}
	spec := LogSpec{Base: "other-0", MaxSize: 1 << 20}
	if err := c2.Keep(r2, spec, int(m2.Fd())); err != nil {
		t.Fatal(err)
	}
	m2.Write([]byte("typed\r"))
	<-waited2
	testutil.Eventually(t, "the end said", func() bool { return slices.Contains(n.endedRuns(), r2) })
	if got := ttyBytes(t, sd, spec.Base); got != "typed\r\ngot typed\r\n" {
		t.Errorf("log %q", got)
	}
	n.mu.Lock()
	wrote := n.wrote
	n.mu.Unlock()
	if wrote == 0 {
		t.Error("no wrote said")
	}
	// A drop of a run that ended is answered at once.
	if err := c2.Drop(r2); err != nil {
		t.Fatal(err)
	}
}

// A drop is answered once what the run left in its terminal is in the
// log; the keeper holds nothing else open, and exits on quit once it holds
// nothing.
func TestKeeperDropWritesTheRest(t *testing.T) {
	kp, _, c, done, sd, _ := startKeeperIn(t)
	m, r, _ := startInTTY(t, `echo before; read x; echo "after $x"; exec sleep 1000`)
	if err := c.Keep(r, testLog, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	// A keep of a run that is not the process it says is refused.
	if err := c.Keep(Run{ID: "liar:0", PID: r.PID, Ticks: r.Ticks + 1}, testLog, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the keeper's descriptors", func() bool {
		// The run's log file is open from a write until the next turn.
		open := heldOpen(kp.Process.Pid)
		return open == "ptmx=1 pidfd=1 socket=2 dir=2 other=1" || open == "ptmx=1 pidfd=1 socket=2 dir=2 other=0"
	}, testutil.Explain(func() string { return heldOpen(kp.Process.Pid) + "\n" + fdList(kp.Process.Pid) }))
	m.Write([]byte("x\r"))
	testutil.Eventually(t, "the output logged", func() bool { return strings.Contains(ttyBytes(t, sd, testLog.Base), "after x") })
	if err := c.Drop(r); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the master let go", func() bool {
		return heldOpen(kp.Process.Pid) == "ptmx=0 pidfd=0 socket=2 dir=2 other=0"
	}, testutil.Explain(func() string { return heldOpen(kp.Process.Pid) + "\n" + fdList(kp.Process.Pid) }))
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("keeper: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not exit on quit")
	}
}

// A keeper holding a run's master stays when its daemon quits, and hands
// the master back to the next daemon; it exits by itself once that run
// ends, without any daemon.
func TestKeeperOutlivesQuitWhileHolding(t *testing.T) {
	kp, sock, c, done := startKeeper(t)
	// exec: the run is the sleep itself, so killing it ends the terminal's
	// last holder even where SIGHUP is ignored (nohup), which would keep a
	// child of sh alive past the session leader's end.
	m, r, _ := startInTTY(t, "exec sleep 1000")
	if err := c.Keep(r, testLog, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the keeper exited holding a live run's master")
	case <-time.After(300 * time.Millisecond):
	}
	c2, held, err := Dial(sock, Notices{}, kp.Process.Pid)
	if err != nil || len(held) != 1 || held[0].Run != r {
		t.Fatalf("handed back %v, %v", held, err)
	}
	unix.Close(held[0].FD)
	c2.Quit()
	syscall.Kill(r.PID, syscall.SIGKILL)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("keeper: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper lingered after its last run ended")
	}
}

// A keeper nobody ever connects to goes away after its grace.
func TestKeeperGrace(t *testing.T) {
	sd := testutil.StateDir(t)
	lfd, err := Listen(At(sd))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := serve(lfd, sd.FD(), 200*time.Millisecond); code != 0 {
		t.Errorf("serve = %d", code)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Error("the keeper did not wait for its first daemon")
	}
	if _, err := sd.Lstat(SocketName); err == nil {
		t.Error("the keeper left its socket behind")
	}
	// A socket left behind is replaced.
	lfd, err = Listen(At(sd))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lfd)
	lfd, err = Listen(At(sd))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lfd)
}

// heldOpen counts what pid holds open of what a keeper may hold: masters,
// pidfds and sockets, and anything else that is not the standard streams
// on /dev/null or the Go runtime's own (its poller, the cgroup files it
// reads, the race detector's pipe).
func heldOpen(pid int) string {
	n := map[string]int{}
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	for _, e := range ents {
		l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + e.Name())
		switch {
		case l == "/dev/ptmx" || strings.HasPrefix(l, "/dev/pts/"):
			n["ptmx"]++
		case l == "anon_inode:[pidfd]":
			n["pidfd"]++
		case isDir("/proc/" + strconv.Itoa(pid) + "/fd/" + e.Name()):
			n["dir"]++
		case strings.HasPrefix(l, "socket:"):
			n["socket"]++
		case l == "/dev/null" || l == "anon_inode:[eventpoll]" || l == "anon_inode:[eventfd]" ||
			strings.HasPrefix(l, "/sys/fs/cgroup/") || strings.HasPrefix(l, "pipe:") && raceEnabled:
		default:
			n["other"]++
		}
	}
	return fmt.Sprintf("ptmx=%d pidfd=%d socket=%d dir=%d other=%d", n["ptmx"], n["pidfd"], n["socket"], n["dir"], n["other"])
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func fdList(pid int) string {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + e.Name())
		b.WriteString(e.Name() + " -> " + l + "\n")
	}
	return b.String()
}

// A log that cannot be written: the keeper reads on (the run does not
// block), says how much it could not write and why, and once it can write
// again says so and writes on.
func TestKeeperSaysWhatItCannotWrite(t *testing.T) {
	_, _, c, _, sd, n := startKeeperIn(t)
	// state_dir/logs is a file: no log can be opened in it.
	if err := os.WriteFile(filepath.Join(sd.Path(), "logs"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, r, waited := startInTTY(t, `i=0; while [ $i -lt 4096 ]; do printf '%0127d\n' $i; i=$((i+1)); done; while read x; do echo "after $x"; done`)
	if err := c.Keep(r, testLog, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	lost := func() int64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		var b int64
		for _, f := range n.failed {
			b += f.Bytes
		}
		return b
	}
	testutil.Eventually(t, "the 512 KiB written said lost", func() bool { return lost() >= 4096*129 },
		testutil.Explain(func() string { return fmt.Sprintf("%d bytes said lost: %+v", lost(), n.failed) }))
	select {
	case <-waited:
		t.Fatal("the run ended")
	default:
	}
	n.mu.Lock()
	why := n.failed[0].Err
	n.mu.Unlock()
	if !strings.Contains(why, "logs") {
		t.Errorf("failed says %q", why)
	}
	// The directory comes back: the next write heals.
	if err := os.Remove(filepath.Join(sd.Path(), "logs")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the log written again", func() bool {
		m.Write([]byte("x\r"))
		b, _ := os.ReadFile(filepath.Join(sd.Path(), "logs", testLog.Base+".log"))
		return strings.Contains(string(b), "after x")
	})
	testutil.Eventually(t, "healed said", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.healed > 0
	})
}
