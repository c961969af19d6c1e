package notify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// systemdNotify returns the path of the real systemd-notify binary.
func systemdNotify(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("systemd-notify")
	if err != nil {
		testutil.Missing(t, "systemd-notify not installed (Debian package systemd); CI installs it")
	}
	return bin
}

// run runs a client with NOTIFY_SOCKET set and fails the test unless it exits 0.
// The deadline only guards against a hang: systemd-notify gives up on its
// barrier by itself after 5s and then exits non-zero.
func run(t *testing.T, addr string, cred *syscall.Credential, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// systemd-notify sends its message, then BARRIER=1 with a pipe, and waits
// until the server closes the pipe: it returns 0 only if the fd was closed.
func TestSystemdNotifyBinary(t *testing.T) {
	bin := systemdNotify(t)
	s, ch := listen(t, sockPath(t), Options{})
	// --ready and --status go out together, in one datagram.
	run(t, s.Addr(), nil, bin, "--ready", "--status=waiting for work")
	m := next(t, ch)
	if !m.Ready || m.Status == nil || *m.Status != "waiting for work" {
		t.Fatalf("got %q, want READY=1 and STATUS=waiting for work in one message", m)
	}
	if m := next(t, ch); !m.Barrier {
		t.Fatalf("got %q, want the barrier", m)
	}
	run(t, s.Addr(), nil, bin, "WATCHDOG=1", "X_TEND_TURN=active")
	if m := nextNotBarrier(t, ch); !m.Watchdog || m.Turn == nil || !*m.Turn {
		t.Fatalf("got %q", m)
	}
	// A bad field among good ones: the good ones still apply.
	run(t, s.Addr(), nil, bin, "READY=2", "STATUS=still here", "MAINPID=abc")
	if m := nextNotBarrier(t, ch); m.Ready || m.MainPID != nil || m.Status == nil || *m.Status != "still here" {
		t.Fatalf("got %q, want STATUS=still here alone", m)
	}
	if s.Dropped() != 0 {
		t.Errorf("Dropped() = %d", s.Dropped())
	}
}

// nextNotBarrier returns the next message that is not systemd-notify's
// BARRIER=1 alone (it sends one after each message, in its own datagram).
func nextNotBarrier(t *testing.T, ch <-chan Message) Message {
	t.Helper()
	for {
		m := next(t, ch)
		m.SenderPID = 0
		if m != (Message{Barrier: true}) {
			return m
		}
	}
}

// python's sdnotify package, inlined.
const pythonSdnotify = `
import os, socket
addr = os.environ["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect(addr)
s.sendall("READY=1\nSTATUS=from python\n".encode())
`

func TestPythonSdnotify(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.Missing(t, "python3 not installed")
	}
	s, ch := listen(t, sockPath(t), Options{})
	run(t, s.Addr(), nil, py, "-c", pythonSdnotify)
	if m := next(t, ch); !m.Ready || *m.Status != "from python" {
		t.Fatalf("got %q", m)
	}
}

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
}

// With Owner, a child running as that user can send to a 0600 socket.
func TestOwnerCanSend(t *testing.T) {
	needRoot(t)
	bin := systemdNotify(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil { // let nobody reach the socket
			t.Fatal(err)
		}
	}
	other := &syscall.Credential{Uid: nobody, Gid: nobody}
	s, ch := listen(t, filepath.Join(dir, "owned.sock"), Options{Owner: &Owner{UID: nobody, GID: nobody}})
	fi, err := os.Lstat(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket owned by %d:%d mode %v", st.Uid, st.Gid, fi.Mode())
	}
	run(t, s.Addr(), other, bin, "--ready")
	if m := next(t, ch); !m.Ready {
		t.Fatalf("got %q", m)
	}

	// Without Owner the same user is refused by the file's permissions.
	s2, _ := listen(t, filepath.Join(dir, "root.sock"), Options{})
	cmd := exec.Command(bin, "--ready")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+s2.Addr())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: other}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("nobody could send to a root-owned 0600 socket: %s", out)
	}
}
