package epoll

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// table maps each pipe inode to how many descriptors of the table at dir
// (/proc/self/fd or /proc/self/task/TID/fd) name it, and returns the
// table's size too. The standard streams (a pipe under go test) are left
// out: every table keeps them.
func table(t *testing.T, dir string) (pipes map[uint64]int, size int) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pipes = map[uint64]int{}
	for _, name := range names {
		if fd, _ := strconv.Atoi(name); fd <= 2 {
			continue
		}
		link, err := os.Readlink(dir + "/" + name)
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		size++
		if ino, ok := strings.CutPrefix(link, "pipe:["); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64)
			pipes[n]++
		}
	}
	return pipes, size
}

func inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func taskFD(l *Loop) string { return fmt.Sprintf("/proc/self/task/%d/fd", l.tid) }

// A loop's table is its own: it starts without the process's descriptors,
// a watched read end leaves the process's table for the loop's, and
// handlers, Pause and Resume, Do, Close and hang-ups work on it there.
func TestWatchedDescriptorsLiveInTheLoopsTable(t *testing.T) {
	var before []int // the process's own descriptors: none may reach the loop's table
	for range 50 {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, fd)
	}
	defer func() {
		for _, fd := range before {
			unix.Close(fd)
		}
	}()
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !l.private {
		t.Skip("no table of its own here (pidfd_getfd or unshare refused)")
	}
	_, empty := table(t, taskFD(l))
	if empty > 12 {
		t.Errorf("a new loop's table has %d descriptors: the process's were copied in", empty)
	}

	const n = 100
	var mu sync.Mutex // guards got and onLoop
	got := make([][]byte, n)
	onLoop := true
	ended := make(chan int, n)
	writers := make([]int, n)
	watches := make([]*Watch, n)
	inodes := map[uint64]bool{}
	for i := range n {
		r, w := pipe(t)
		writers[i] = w
		ino := inode(t, r)
		inodes[ino] = true
		watches[i], err = l.Add(r, func(fd int) bool {
			mu.Lock()
			defer mu.Unlock()
			onLoop = onLoop && OnLoopThread()
			var b [16]byte
			k, err := unix.Read(fd, b[:])
			if err == unix.EAGAIN {
				return true
			}
			if k <= 0 {
				ended <- i
				return false
			}
			got[i] = append(got[i], b[:k]...)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if st := (unix.Stat_t{}); unix.Fstat(r, &st) == nil && st.Ino == ino {
			t.Fatalf("Add left the caller's descriptor %d open", r)
		}
	}
	main, _ := table(t, "/proc/self/fd")
	loop, size := table(t, taskFD(l))
	for ino := range inodes {
		if main[ino] != 1 || loop[ino] != 1 {
			t.Fatalf("pipe %d: %d ends in the process's table (want the write end only), %d in the loop's (want the read end)", ino, main[ino], loop[ino])
		}
	}
	if size > n+12 {
		t.Errorf("the loop's table holds %d descriptors for %d watches", size, n)
	}
	if OnLoopThread() {
		t.Error("OnLoopThread is true in the test's goroutine")
	}

	// Handlers read each pipe's bytes from the loop's copy.
	for i, w := range writers {
		if _, err := unix.Write(w, []byte{'a', byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every handler's read", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if len(got[i]) != 2 {
				return false
			}
		}
		return true
	})

	// Pause from outside a handler, Do reads the paused copy, Resume.
	if err := watches[0].PauseLocked(); err != nil {
		t.Fatal(err)
	}
	unix.Write(writers[0], []byte("xyz"))
	time.Sleep(50 * time.Millisecond)
	var viaDo []byte
	if err := watches[0].Do(func(fd int) {
		var b [8]byte
		k, _ := unix.Read(fd, b[:2])
		viaDo = append(viaDo, b[:max(k, 0)]...)
	}); err != nil {
		t.Fatal(err)
	}
	if string(viaDo) != "xy" {
		t.Errorf("Do read %q, want \"xy\"", viaDo)
	}
	if err := watches[0].Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rest after Resume", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return string(got[0][2:]) == "z"
	})

	// Hang-ups end watches 0 to n/2; Close ends the rest.
	for i := range n / 2 {
		unix.Close(writers[i])
	}
	seen := map[int]bool{}
	for len(seen) < n/2 {
		select {
		case i := <-ended:
			seen[i] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d hang-ups seen", len(seen), n/2)
		}
	}
	for i := n / 2; i < n; i++ {
		if err := watches[i].Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := watches[i].Do(func(int) { t.Error("Do ran on a closed watch") }); !errors.Is(err, ErrClosed) {
			t.Errorf("Do after Close: %v", err)
		}
		unix.Close(writers[i])
	}
	loop, _ = table(t, taskFD(l))
	for ino := range inodes {
		if loop[ino] != 0 {
			t.Fatalf("pipe %d still open in the loop's table after its watch ended", ino)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if got[i][0] != 'a' || got[i][1] != byte(i) {
			t.Errorf("pipe %d got %v", i, got[i])
		}
	}
	if !onLoop {
		t.Error("a handler ran where OnLoopThread is false")
	}
}

// KeepOriginal leaves the caller's descriptor open and working beside the
// loop's copy, and Close of the watch leaves it open.
func TestKeepOriginal(t *testing.T) {
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r, w := pipe(t)
	defer unix.Close(w)
	read := make(chan byte, 4)
	watch, err := l.Add(r, func(fd int) bool {
		var b [1]byte
		if k, _ := unix.Read(fd, b[:]); k == 1 {
			read <- b[0]
		}
		return true
	}, KeepOriginal())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	unix.Write(w, []byte("k"))
	select {
	case b := <-read:
		if b != 'k' {
			t.Errorf("handler read %q", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not read")
	}
	if err := watch.Close(); err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("o"))
	var b [1]byte
	if k, err := unix.Read(r, b[:]); k != 1 || b[0] != 'o' {
		t.Fatalf("the original after Close: read %d %q, %v", k, b, err)
	}
}

// A handler may pause, resume and close its own loop's watches (that runs
// at once) but not Add: the descriptor it would pass is not the process's.
func TestFromAHandler(t *testing.T) {
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r1, w1 := pipe(t)
	defer unix.Close(w1)
	r2, w2 := pipe(t)
	defer unix.Close(w2)
	other, err := l.Add(r2, func(fd int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	_, err = l.Add(r1, func(fd int) bool {
		var b [8]byte
		unix.Read(fd, b[:])
		errs := []error{other.PauseLocked(), other.Resume(), other.Close()}
		if l.private {
			if _, err := l.Add(fd, func(int) bool { return true }); err == nil {
				errs = append(errs, errors.New("Add from a handler succeeded"))
			}
		}
		done <- errors.Join(errs...)
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(w1, []byte("go"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not finish: it waited for its own loop")
	}
}

// Where the kernel gives no table of a loop's own, a loop in the
// process's table works as before.
func TestSharedTableLoop(t *testing.T) {
	l, err := start(false)
	if err != nil {
		t.Fatal(err)
	}
	if l.private {
		t.Fatal("start(false) made a private table")
	}
	r, w := pipe(t)
	got, ended := make(chan byte, 8), make(chan struct{})
	watch, err := l.Add(r, func(fd int) bool {
		var b [1]byte
		k, err := unix.Read(fd, b[:])
		if err == unix.EAGAIN {
			return true
		}
		if k <= 0 {
			close(ended)
			return false
		}
		got <- b[0]
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	ino := inode(t, r) // still open: in a shared table the watch uses the caller's descriptor
	if err := watch.PauseLocked(); err != nil {
		t.Fatal(err)
	}
	unix.Write(w, []byte("s"))
	select {
	case <-got:
		t.Fatal("a paused watch's handler ran")
	case <-time.After(50 * time.Millisecond):
	}
	if err := watch.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if b != 's' {
			t.Errorf("read %q", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no read after Resume")
	}
	unix.Close(w)
	within(t, "the hang-up", ended)
	watch.Close() // returns once the loop is past the handler, which closed it
	if st := (unix.Stat_t{}); unix.Fstat(r, &st) == nil && st.Ino == ino {
		t.Error("the read end is still open after its hang-up ended the watch")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Watching 3 x 1,000 pipes with the descriptor limit at 1,024 (soft and
// hard, where no table holds more than 1,024): the pool spreads them over
// the tables of several loops. In a child process, whose limit the test
// lowers.
func TestThousandsUnderALowLimit(t *testing.T) {
	if os.Getenv("EPOLL_TEST_LOW_LIMIT") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestThousandsUnderALowLimit$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "EPOLL_TEST_LOW_LIMIT=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	const limit, n = 1024, 3000
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Fatal(err)
	}

	// One table cannot: its read ends alone hit EMFILE.
	var held []int
	var single error
	for len(held) < n && single == nil {
		var p [2]int
		if single = unix.Pipe2(p[:], unix.O_CLOEXEC); single == nil {
			unix.Close(p[1])
			held = append(held, p[0])
		}
	}
	for _, fd := range held {
		unix.Close(fd)
	}
	if !errors.Is(single, unix.EMFILE) {
		t.Fatalf("%d read ends held in one table without EMFILE (%v): the limit is not low", len(held), single)
	}

	var pool Pool
	var mu sync.Mutex // guards got
	got := make([][]byte, n)
	ended := make(chan int, n)
	watches := make([]*Watch, n)
	for i := range n {
		r, w := pipe(t)
		if _, err := unix.Write(w, []byte{byte(i), byte(i >> 8)}); err != nil {
			t.Fatal(err)
		}
		unix.Close(w)   // the read end then holds its bytes and the hang-up
		var self *Watch // set on the loop's thread before the handler's first call
		watch, err := pool.Add(r, func(fd int) bool {
			var b [8]byte
			k, err := unix.Read(fd, b[:])
			if err == unix.EAGAIN {
				return true
			}
			if k <= 0 {
				self.PauseLocked() // keep the descriptor: all n are held at once
				ended <- i
				return true
			}
			mu.Lock()
			got[i] = append(got[i], b[:k]...)
			mu.Unlock()
			return true
		}, OnWatch(func(w *Watch) { self = w }))
		if err != nil {
			t.Fatalf("Add of pipe %d: %v", i, err)
		}
		watches[i] = watch
	}
	for seen := 0; seen < n; seen++ {
		select {
		case <-ended:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d pipes ended", seen, n)
		}
	}
	mu.Lock()
	for i := range n {
		if len(got[i]) != 2 || got[i][0] != byte(i) || got[i][1] != byte(i>>8) {
			t.Errorf("pipe %d got %v", i, got[i])
		}
	}
	mu.Unlock()

	stats := pool.Stats()
	_, mainSize := table(t, "/proc/self/fd")
	total, loopDescs := 0, 0
	for _, s := range stats {
		if !s.Private {
			t.Skip("no tables of the loops' own here")
		}
		pipes, size := table(t, fmt.Sprintf("/proc/self/task/%d/fd", s.TID))
		held := 0
		for _, c := range pipes {
			held += c
		}
		if held != s.Watches || size > limit {
			t.Errorf("loop %d: %d watches, %d pipes in its table of %d", s.TID, s.Watches, held, size)
		}
		total += s.Watches
		loopDescs += size
	}
	t.Logf("%d watched pipes over %d loops (%d descriptors in their tables); %d in the process's table", total, len(stats), loopDescs, mainSize)
	if total != n || len(stats) < 3 {
		t.Errorf("%d watches over %d loops, want %d over 3 or more", total, len(stats), n)
	}
	for _, w := range watches {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, s := range pool.Stats() {
		pipes, _ := table(t, fmt.Sprintf("/proc/self/task/%d/fd", s.TID))
		if s.Watches != 0 || len(pipes) != 0 {
			t.Errorf("loop %d after Close: %d watches, %d pipes", s.TID, s.Watches, len(pipes))
		}
	}
}

// Dup brings a watched descriptor of a loop's own table back into the
// process's table, close-on-exec and naming the same pipe, while the
// watch goes on; a closed watch has nothing to give.
func TestDupBringsAWatchedDescriptorBack(t *testing.T) {
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !l.private {
		t.Skip("no table of the loop's own here")
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	ino := inode(t, p[0])
	got := make(chan string, 4)
	w, err := l.Add(p[0], func(fd int) bool {
		var b [16]byte
		n, _ := unix.Read(fd, b[:])
		got <- string(b[:max(n, 0)])
		return n > 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.PauseLocked(); err != nil {
		t.Fatal(err)
	}
	fd, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if inode(t, fd) != ino {
		t.Errorf("Dup names another file")
	}
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
		t.Error("Dup's descriptor is not close-on-exec")
	}
	if _, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil {
		t.Errorf("Dup's descriptor is not in the process's table: %v", err)
	}
	unix.Write(p[1], []byte("x"))
	var b [1]byte
	if n, err := unix.Read(fd, b[:]); n != 1 || err != nil {
		t.Errorf("reading the copy: %d %v", n, err)
	}
	unix.Write(p[1], []byte("y"))
	w.Resume()
	if s := <-got; s != "y" {
		t.Errorf("the watch read %q after the Dup", s)
	}
	w.Close()
	if fd, err := w.Dup(); err == nil {
		unix.Close(fd)
		t.Error("Dup of a closed watch")
	}
}
