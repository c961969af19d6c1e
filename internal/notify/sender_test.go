package notify

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sendAs sends msg to path from a thread whose uids are uid's (root
// changes one thread's alone with a raw setresuid; that thread is thrown
// away with its goroutine, which never unlocks it).
func sendAs(t *testing.T, uid int, path, msg string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), 0); e != 0 {
			errc <- e
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		errc <- unix.Sendto(fd, []byte(msg), 0, &unix.SockaddrUnix{Name: path})
	}()
	if err := <-errc; err != nil {
		t.Fatalf("sending as uid %d: %v", uid, err)
	}
}

// A datagram of a user other than root, tend's own and the run's
// (Options.Owner) is dropped and counted as malformed, even when the
// socket's mode lets that user send (docs/trust.md#sockets).
func TestDatagramsOfOtherUsersAreDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to send as another user")
	}
	dir, err := os.MkdirTemp("", "notify-sender-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var drops []error
	onDrop := func(err error) { mu.Lock(); drops = append(drops, err); mu.Unlock() }

	// The run is tend's own: nobody (65534) may not steer it.
	s, got := listen(t, filepath.Join(dir, "own.sock"), Options{Mode: 0o666, OnDrop: onDrop})
	sendAs(t, 65534, s.Addr(), "STATUS=from nobody")
	sendAs(t, 0, s.Addr(), "STATUS=from root")
	select {
	case m := <-got:
		if m.Status == nil || *m.Status != "from root" {
			t.Errorf("handed over %+v", m)
		}
	case <-time.After(wait):
		t.Fatal("root's datagram never came")
	}
	select {
	case m := <-got:
		t.Errorf("handed over %+v too", m)
	case <-time.After(100 * time.Millisecond):
	}
	mu.Lock()
	if s.Dropped() != 1 || len(drops) != 1 || !errors.Is(drops[0], ErrSender) || DropReason(drops[0]) != DropMalformed {
		t.Errorf("dropped %d: %v", s.Dropped(), drops)
	}
	mu.Unlock()

	// The run is nobody's: its datagrams are read, another user's are not.
	s2, got2 := listen(t, filepath.Join(dir, "theirs.sock"), Options{Mode: 0o666, OnDrop: onDrop, Owner: &Owner{UID: 65534, GID: 65534}})
	sendAs(t, 65533, s2.Addr(), "STATUS=from another")
	sendAs(t, 65534, s2.Addr(), "STATUS=from the run")
	select {
	case m := <-got2:
		if m.Status == nil || *m.Status != "from the run" {
			t.Errorf("handed over %+v", m)
		}
	case <-time.After(wait):
		t.Fatal("the run's datagram never came")
	}
	if s2.Dropped() != 1 {
		t.Errorf("dropped %d, want 1", s2.Dropped())
	}
}
