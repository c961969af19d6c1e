package epoll

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pipe returns a non-blocking read end and a blocking write end.
func pipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	return p[0], p[1]
}

func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Every pipe's bytes reach its own handler, and a handler that sees EOF
// ends its watch, which closes the descriptor.
func TestReadsManyAndClosesAtEOF(t *testing.T) {
	l, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var mu sync.Mutex
	got := make([][]byte, n)
	ended := make(chan int, n)
	writers := make([]int, n)
	readers := make([]int, n)
	inodes := make([]uint64, n)
	for i := range n {
		r, w := pipe(t)
		readers[i], writers[i] = r, w
		var st unix.Stat_t
		if err := unix.Fstat(r, &st); err != nil {
			t.Fatal(err)
		}
		inodes[i] = st.Ino
		if _, err := l.Add(r, func(fd int) bool {
			buf := make([]byte, 64)
			k, err := unix.Read(fd, buf)
			if err == unix.EAGAIN {
				return true
			}
			if k <= 0 {
				ended <- i
				return false
			}
			mu.Lock()
			got[i] = append(got[i], buf[:k]...)
			mu.Unlock()
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range writers {
		if _, err := unix.Write(w, []byte{byte(i), byte(i >> 8)}); err != nil {
			t.Fatal(err)
		}
		unix.Close(w)
	}
	seen := map[int]bool{}
	for range n {
		select {
		case i := <-ended:
			seen[i] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d pipes ended", len(seen), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if len(got[i]) != 2 || got[i][0] != byte(i) || got[i][1] != byte(i>>8) {
			t.Errorf("pipe %d got %v", i, got[i])
		}
	}
	// The loop closed the read ends: each number is free, or names another
	// file now (the runtime may have taken it meanwhile).
	for i, fd := range readers {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Ino == inodes[i] {
			t.Fatalf("read end %d still open after EOF", fd)
		}
	}
}

// Close waits for a handler in flight, and no handler runs after it.
func TestCloseWaitsForHandler(t *testing.T) {
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r, w := pipe(t)
	defer unix.Close(w)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls sync.Map
	n := 0
	watch, err := l.Add(r, func(fd int) bool {
		n++
		calls.Store(n, true)
		if n == 1 {
			close(entered)
			<-release
		}
		var b [8]byte
		unix.Read(fd, b[:])
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("x"))
	within(t, "the handler", entered)
	closed := make(chan struct{})
	go func() {
		watch.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the handler was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	within(t, "Close", closed)
	unix.Write(w, []byte("y"))
	time.Sleep(50 * time.Millisecond)
	if _, again := calls.Load(2); again {
		t.Error("handler ran after Close returned")
	}
	if err := watch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A descriptor that cannot be watched (a regular file) is an error, and
// stays the caller's.
func TestAddRefusesRegularFile(t *testing.T) {
	l, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/proc/self/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := l.Add(fd, func(int) bool { return true }); err == nil {
		t.Fatal("Add of a regular file succeeded")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Errorf("fd closed by a failed Add: %v", err)
	}
}

// A paused watch is not called, not even for a hang-up (which would spin
// a level-triggered loop); what arrived meanwhile waits in the pipe, and
// Resume hands it over, then the hang-up ends the watch.
func TestPauseHoldsBackUntilResume(t *testing.T) {
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r, w := pipe(t)
	var mu sync.Mutex // guards calls, got, pause and watch
	calls, got, pause := 0, []byte(nil), true
	var watch *Watch
	paused, ended := make(chan struct{}, 1), make(chan struct{})
	mu.Lock()
	watch, err = l.Add(r, func(fd int) bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if pause {
			pause = false
			if err := watch.PauseLocked(); err != nil {
				t.Error(err)
			}
			paused <- struct{}{}
			return true
		}
		var b [64]byte
		n, err := unix.Read(fd, b[:])
		if err == unix.EAGAIN {
			return true
		}
		if n <= 0 {
			close(ended)
			return false
		}
		got = append(got, b[:n]...)
		return true
	})
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("held"))
	within(t, "the pause", paused)
	unix.Write(w, []byte(" back"))
	unix.Close(w) // a hang-up while paused
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if calls != 1 || len(got) != 0 {
		t.Errorf("while paused: %d calls, read %q", calls, got)
	}
	mu.Unlock()
	if err := watch.Resume(); err != nil {
		t.Fatal(err)
	}
	within(t, "the end after Resume", ended)
	mu.Lock()
	defer mu.Unlock()
	if string(got) != "held back" {
		t.Errorf("after Resume read %q", got)
	}
	if err := watch.Resume(); err != nil {
		t.Errorf("Resume of an ended watch: %v", err)
	}
}
