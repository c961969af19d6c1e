package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Sockets trusted by their peer, tried as another local user would
// (docs/trust.md#sockets): the test, as root, binds a socket where tend
// looks for one and hands it to this test binary running as nobody, which
// listens on it; the kernel then names nobody as the socket's peer.

// nobody is the other user.
const nobody = 65534

// otherUser starts this test binary as name (a helper TestMain knows), as
// nobody, serving the socket bound at path: its descriptor 3. What it
// prints goes to out. It is killed at the end of the test.
func otherUser(t *testing.T, name, path string, sockType int, out io.Writer) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the other user's process is started with setuid")
	}
	fd, err := unix.Socket(unix.AF_UNIX, sockType|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock := os.NewFile(uintptr(fd), path)
	defer sock.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	// go test's own directory is private: a copy where nobody can run it.
	dir, err := os.MkdirTemp("", "tend-other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	copyFile(t, exe, bin)
	cmd := exec.Command(bin)
	cmd.Env = []string{"GORACE=atexit_sleep_ms=10", "HOME=/"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{sock}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// fakeKeeperMain is the test binary run as tend-fake-keeper: another
// user's process serving the keeper's socket (descriptor 3), as the
// attacker of a state directory they could replace would. It says what it
// is sent; a master would let it type into a root shell.
func fakeKeeperMain() {
	if err := unix.Listen(3, 4); err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Printf("listening as uid %d\n", os.Getuid())
	for {
		fd, _, err := unix.Accept(3)
		if err != nil {
			fmt.Println("accept:", err)
			os.Exit(1)
		}
		fmt.Println("accepted")
		go func() {
			defer unix.Close(fd)
			buf, oob := make([]byte, 256), make([]byte, 256)
			for {
				n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
				if err != nil || n == 0 {
					return
				}
				fmt.Printf("got %q (%d bytes of descriptors)\n", buf[:n], oobn)
			}
		}()
	}
}

// fakeDaemonMain is the test binary run as tend-fake-daemon: another
// user's process serving an API socket (descriptor 3), answering every
// request as a daemon would, and saying which it got.
func fakeDaemonMain() {
	if err := unix.Listen(3, 16); err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	l, err := net.FileListener(os.NewFile(3, "socket"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("listening as uid %d\n", os.Getuid())
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("request %s %s\n", r.Method, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"version":"fake"}`)
	}))
}

// TestTrustAFakeKeeperOfAnotherUserIsRefused: another user's process serves
// state_dir/keep.sock (as after replacing a state directory under their
// directory, which TestTrustAStateDirUnderAnotherUsersDirectoryIsRefused now
// refuses). The daemon asks the socket's peer before it hands over
// anything: it refuses, says so on stderr, replaces the socket with a
// keeper of its own, and the tty run keeps its terminal; the fake keeper
// gets no word and no master.
func TestTrustAFakeKeeperOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the other user's process is started with setuid")
	}
	tend := tendBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, ".tend")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	var fakeOut syncBuffer
	fake := otherUser(t, "tend-fake-keeper", filepath.Join(state, "keep.sock"), unix.SOCK_SEQPACKET, &fakeOut)
	testutil.Eventually(t, "the fake keeper", func() bool { return strings.Contains(fakeOut.String(), "listening as uid 65534") },
		testutil.Explain(fakeOut.String))

	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[defaults]
stop_grace = "2s"

[program.shell]
command = ["sh"]
tty = true
env = { PS1 = "tend$ " }
`)
	up, log := startUpLogged(t, tend, conf)
	c := client.New(filepath.Join(state, "tend.sock"))
	waitRunning(t, c, "shell:0")
	testutil.Eventually(t, "the refusal said", func() bool {
		return strings.Contains(log(), "not tend's keeper") && strings.Contains(log(), fmt.Sprintf("pid %d of uid 65534", fake.Process.Pid))
	}, testutil.Explain(log))

	// The run keeps its terminal, and tend's own keeper holds it.
	screenShows(t, c, "shell:0", "tend$")
	if _, err := c.Input("shell:0", program.Input{Text: "echo held-$((40+2))", Enter: true}); err != nil {
		t.Fatal(err)
	}
	screenShows(t, c, "shell:0", "held-42")
	if kp := keeperOf(t, dir); kp == fake.Process.Pid {
		t.Errorf("the fake keeper (pid %d) is recorded as tend's", kp)
	}
	if strings.Contains(fakeOut.String(), "got ") {
		t.Errorf("the fake keeper was sent something:\n%s", fakeOut.String())
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	if strings.Contains(fakeOut.String(), "got ") {
		t.Errorf("the fake keeper was sent something:\n%s", fakeOut.String())
	}
}

// TestTrustTheCLIRefusesADaemonOfAnotherUser: a tend.sock served by another
// (non-root) user, as a socket planted where the CLI looks would be: the
// CLI sends it nothing (no request reaches it) and exits 4, saying who
// serves it.
func TestTrustTheCLIRefusesADaemonOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the other user's process is started with setuid")
	}
	tend := tendBinary(t)
	sock := filepath.Join(t.TempDir(), "tend.sock")
	var fakeOut syncBuffer
	fake := otherUser(t, "tend-fake-daemon", sock, unix.SOCK_STREAM, &fakeOut)
	testutil.Eventually(t, "the fake daemon", func() bool { return strings.Contains(fakeOut.String(), "listening as uid 65534") },
		testutil.Explain(fakeOut.String))
	for _, args := range [][]string{{"ps"}, {"add", "x", "--", "sh", "-c", "id"}} {
		code, stdout, stderr := tendRun(t, tend, append([]string{"--socket", sock}, args...)...)
		want := fmt.Sprintf("pid %d of uid 65534, neither root nor you (uid 0); refused", fake.Process.Pid)
		if code != 4 || !strings.Contains(stderr, "served by another user") || !strings.Contains(stderr, want) {
			t.Errorf("tend %s: exit %d\nstdout: %s\nstderr: %s", args[0], code, stdout, stderr)
		}
	}
	if strings.Contains(fakeOut.String(), "request") {
		t.Errorf("a request reached the other user's socket:\n%s", fakeOut.String())
	}
}

// TestTrustAnotherUserOnTendSockIsRefused: the daemon's own tend.sock, its modes
// loosened as if by mistake (the state dir and its parents 0711, the socket
// 0666): another user who connects gets 403 naming their uid, and no
// answer of the API; root still gets in.
func TestTrustAnotherUserOnTendSockIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	tend := tendBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
	up := startUp(t, tend, conf)
	sock := filepath.Join(dir, ".tend", "tend.sock")
	c := client.New(sock)
	waitRunning(t, c, "w:0")
	for d := filepath.Dir(sock); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	answer := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, its uid changed, ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, nobody, nobody, 0); e != 0 {
			answer <- "setresuid: " + e.Error()
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			answer <- err.Error()
			return
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
			answer <- "connect: " + err.Error()
			return
		}
		tv := unix.NsecToTimeval(int64(10 * time.Second))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.Write(fd, []byte("GET /v1/status HTTP/1.1\r\nHost: tend\r\nConnection: close\r\n\r\n"))
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 || err != nil {
				break
			}
			got = append(got, buf[:n]...)
		}
		answer <- string(got)
	}()
	got := <-answer
	if !strings.HasPrefix(got, "HTTP/1.1 403") || !strings.Contains(got, "uid 65534 may not use this socket") || strings.Contains(got, "w:0") {
		t.Errorf("another user's request:\n%s", got)
	}
	if _, err := c.Status("w:0"); err != nil {
		t.Errorf("root: %v", err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
}
