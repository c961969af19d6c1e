package keeper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/testutil"
)

// asUser runs f on a thread of its own whose uids are uid's: root changes
// one thread's alone with a raw setresuid. The thread is thrown away with
// its goroutine, which never unlocks it.
func asUser(t *testing.T, uid int, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), 0); e != 0 {
			errc <- fmt.Errorf("setresuid %d: %w", uid, e)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// The daemon talks only to the keeper it knows: a socket served by a
// process of its uid with another pid is refused, and so is one served by
// another user, whatever its pid (docs/trust.md#sockets).
func TestDialRefusesWhatIsNotTheKeeper(t *testing.T) {
	sd := testutil.StateDir(t)
	sock := At(sd)
	lfd, err := Listen(sock) // this process serves it
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	me := fmt.Sprintf("pid %d of uid %d", os.Getpid(), os.Geteuid())
	if _, _, err := Dial(sock, Notices{}, os.Getpid()+1); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), me) {
		t.Errorf("a process of ours that is not the keeper: %v", err)
	}
	if _, _, err := Dial(sock, Notices{}); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "none started or recorded") {
		t.Errorf("no keeper known: %v", err)
	}
	// The keeper known is greeted (and, as nothing here answers, Dial
	// gives up waiting for its answer).
	if _, _, err := Dial(sock, Notices{}, 0, os.Getpid()); errors.Is(err, ErrUntrusted) || !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("the keeper known: %v", err)
	}

	if os.Geteuid() != 0 {
		t.Skip("needs root to serve a socket as another user")
	}
	lfd2, err := Listen(sock) // replaces the socket above
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd2)
	if err := asUser(t, 65534, func() error { return unix.Listen(lfd2, 4) }); err != nil { // as a keeper listens again
		t.Fatal(err)
	}
	_, _, err = Dial(sock, Notices{}, os.Getpid())
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d of uid 65534", os.Getpid())) {
		t.Errorf("another user's socket, with the keeper's pid: %v", err)
	}
}

// The keeper serves only its own uid and root: another user who can reach
// its socket (its modes loosened here) is hung up on, unanswered.
func TestKeeperRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	kp, sock, c, _ := startKeeper(t)
	defer c.Close()
	// The state dir and the test's directories above it, up to /tmp.
	for dir := filepath.Dir(sock.Path); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sock.Path, 0o777); err != nil {
		t.Fatal(err)
	}
	var answer string
	err := asUser(t, 65534, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock.Path}); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		tv := unix.NsecToTimeval(int64(10 * time.Second))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if err := send(fd, List{}, -1, 0); err != nil {
			answer = "send: " + err.Error()
			return nil
		}
		buf := make([]byte, maxMessage)
		n, err := unix.Read(fd, buf)
		answer = fmt.Sprintf("%q %v", buf[:max(n, 0)], err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(answer, `"end"`) || strings.Contains(answer, "resource temporarily unavailable") { // "send: broken pipe": hung up on
		t.Errorf("the keeper (pid %d) answered another user: %s", kp.Process.Pid, answer)
	}
	// Its own daemon is still served.
	c2, held, err := Dial(sock, Notices{}, kp.Process.Pid)
	if err != nil || len(held) != 0 {
		t.Fatalf("Dial = %v, %v", held, err)
	}
	c2.Close()
}

// The record names the keeper while it lives, with the daemon that made
// its socket; once it is gone (its pid free to be used again), nothing.
func TestRecord(t *testing.T) {
	sd := testutil.StateDir(t)
	if got := Recorded(sd); got != nil {
		t.Errorf("nothing recorded: %v", got)
	}
	sleep := exec.Command("sleep", "1000")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Record(sd, sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got := Recorded(sd); !slices.Equal(got, []int{sleep.Process.Pid, os.Getpid()}) {
		t.Errorf("Recorded = %v", got)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if got := Recorded(sd); got != nil {
		t.Errorf("a keeper gone: %v", got)
	}
}
