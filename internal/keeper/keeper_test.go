package keeper

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestMain(m *testing.M) {
	MaybeServe() // this binary re-executed as the keeper (startKeeper)
	os.Exit(m.Run())
}

// startKeeper runs this test binary as a keeper on a new socket in a new
// state directory, as the daemon does, and returns it with a connection to
// it, as the daemon that started it would make.
func startKeeper(t *testing.T) (*exec.Cmd, Socket, *Client, <-chan error) {
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
	c, err := Dial(sock, cmd.Process.Pid, os.Getpid()) // this process made the socket: until the keeper listens again, it is the peer
	if err != nil {
		t.Fatal(err)
	}
	return cmd, sock, c, done
}

// A run in a terminal whose master only the keeper holds goes on writing;
// a daemon that connects later gets the master back and reads what was
// written meanwhile. The keeper holds nothing else open, lets a run's
// master go when the run ends, and exits on quit once it holds nothing.
func TestKeeperHoldsAndHandsBack(t *testing.T) {
	kp, sock, c, done := startKeeper(t)
	pid := kp.Process.Pid
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command("/bin/sh", "-c", `echo first; read x; echo "second $x"; sleep 1000`)
	run.Stdin, run.Stdout, run.Stderr = s, s, s
	run.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	waited := make(chan struct{})
	go func() { run.Wait(); close(waited) }()
	defer func() { run.Process.Kill(); <-waited }()
	ticks, err := reaper.StartTicks(run.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	r := Run{ID: "agent:0", PID: run.Process.Pid, Ticks: ticks}
	if err := c.Keep(r, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	// A keep of a run that is not the process it says is refused.
	if err := c.Keep(Run{ID: "liar:0", PID: run.Process.Pid, Ticks: ticks + 1}, int(m.Fd())); err != nil {
		t.Fatal(err)
	}
	m.Write([]byte("typed\r"))
	m.Close() // the daemon dies: only the keeper's copy is left
	c.Close()

	var back []Held
	testutil.Eventually(t, "the master handed back", func() bool {
		c2, err := Dial(sock, pid)
		if err != nil {
			return false
		}
		defer c2.Close()
		back, err = c2.List()
		return err == nil && len(back) == 1
	})
	if back[0].Run != r {
		t.Fatalf("held %+v, want %+v", back[0].Run, r)
	}
	got := ""
	f := os.NewFile(uintptr(back[0].FD), "master")
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 4096)
	for !strings.Contains(got, "second typed") && time.Now().Before(deadline) {
		f.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := f.Read(buf)
		got += string(buf[:n])
	}
	f.Close()
	if !strings.Contains(got, "first") || !strings.Contains(got, "second typed") {
		t.Fatalf("read back %q", got)
	}

	// Nothing open but its streams, the socket, its epoll set, the daemon's
	// connection and the one run's master and pidfd.
	c3, err := Dial(sock, pid)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	testutil.Eventually(t, "the keeper's descriptors", func() bool {
		return heldOpen(kp.Process.Pid) == "ptmx=1 pidfd=1 socket=2 dir=1 other=0"
	}, testutil.Explain(func() string { return heldOpen(kp.Process.Pid) + "\n" + fdList(kp.Process.Pid) }))

	// The run ends: its master goes.
	run.Process.Kill()
	<-waited
	testutil.Eventually(t, "the ended run's master dropped", func() bool {
		held, err := c3.List()
		for _, h := range held {
			unix.Close(h.FD)
		}
		return err == nil && len(held) == 0
	})
	if err := c3.Quit(); err != nil {
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

// A keeper holding a run's master stays when its daemon quits; it exits by
// itself once that run ends, without any daemon.
func TestKeeperOutlivesQuitWhileHolding(t *testing.T) {
	_, _, c, done := startKeeper(t)
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command("sleep", "1000")
	run.Stdin, run.Stdout, run.Stderr = s, s, s
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	waited := make(chan struct{})
	go func() { run.Wait(); close(waited) }()
	defer func() { run.Process.Kill(); <-waited }()
	ticks, _ := reaper.StartTicks(run.Process.Pid)
	if err := c.Keep(Run{ID: "a:0", PID: run.Process.Pid, Ticks: ticks}, int(m.Fd())); err != nil {
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
	run.Process.Kill()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("keeper: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper lingered after its last run ended")
	}
}

// A keeper nobody ever connects to goes away after its grace; a bad
// message changes nothing.
func TestKeeperMessages(t *testing.T) {
	for _, bad := range []string{"", "keep", "keep a:0 x 1", "keep a:0 1", "drop a:0 -1 2", "list x", "hello"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
	m, err := parse([]byte("keep a:0 12 345"))
	if err != nil || m.run != (Run{ID: "a:0", PID: 12, Ticks: 345}) {
		t.Errorf("parse = %+v, %v", m, err)
	}
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
