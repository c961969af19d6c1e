package epoll

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A loop's thread and its descriptor table.
//
// The thread is locked to the loop's goroutine for good: a thread whose
// table is not the process's must die with it, never run another
// goroutine. It is never the main thread, whose table is the one
// pidfd_getfd copies from and /proc/PID/fd shows. Its table starts as a
// copy of the process's cut down to what the Go runtime may use on any
// thread: the standard streams (a crash prints on fd 2) and the poller's
// epoll and eventfd descriptors (a garbage collection started on this
// thread polls the network; any thread may wake the poller). The poller
// is made to exist first, as spawn's forker thread does.

// loopsByTID finds the loop whose thread the caller is on.
var loopsByTID sync.Map // thread id → *Loop

// OnLoopThread reports whether the caller runs on the thread of a loop
// with a table of its own, that is in a handler (or a function Do runs):
// there, descriptor numbers of the process's table mean another file, or
// none.
func OnLoopThread() bool {
	v, ok := loopsByTID.Load(unix.Gettid())
	return ok && v.(*Loop).private
}

// New starts a loop on a thread of its own, with a descriptor table of its
// own where the kernel allows. It runs for the life of the process.
func New() (*Loop, error) { return start(true) }

// start starts a loop; private false keeps it in the process's table.
func start(private bool) (*Loop, error) {
	ready := make(chan started, 1)
	go launch(private, ready)
	r := <-ready
	return r.l, r.err
}

type started struct {
	l   *Loop
	err error
}

// launch is a loop's goroutine: it locks its thread, sets the loop up
// there and runs it. On error the goroutine ends, and its thread with it.
func launch(private bool, ready chan<- started) {
	runtime.LockOSThread() // never unlocked: see above
	if unix.Gettid() == unix.Getpid() {
		// The main thread. While this goroutine holds it, another cannot
		// run there: that one is the loop, and this one lets the main
		// thread go once the other has its own thread.
		relay := make(chan started, 1)
		go launch(private, relay)
		r := <-relay
		runtime.UnlockOSThread()
		ready <- r
		return
	}
	l, err := setUp(private)
	ready <- started{l, err}
	if err == nil {
		l.run()
	}
}

// setUp makes the loop's table (when private and the kernel allows), its
// eventfd and its epoll set, on the calling thread.
func setUp(private bool) (*Loop, error) {
	l := &Loop{tid: unix.Gettid(), self: -1, xfer: -1, xferOut: -1, watches: map[uint64]*Watch{}}
	var kept []int
	if private {
		kept = runtimeDescriptors() // before the eventfd: it must not count as the runtime's
		private = kept != nil
	}
	wakeOut, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	l.wakeOut = wakeOut
	if private && canCopy(wakeOut) {
		err := ownTable(kept)
		switch {
		case err == nil:
			l.private = true
		case errors.Is(err, errShared): // the table is still the process's: as before
		default:
			go unix.Close(wakeOut) // from a thread of the process's table
			return nil, err
		}
	}
	if err := l.openSet(); err != nil {
		if l.private {
			go unix.Close(wakeOut)
		} else {
			unix.Close(wakeOut)
		}
		return nil, err
	}
	loopsByTID.Store(l.tid, l)
	return l, nil
}

// openSet makes the epoll set with the eventfd in it.
func (l *Loop) openSet() error {
	l.wake = l.wakeOut
	if l.private {
		self, err := unix.PidfdOpen(os.Getpid(), 0)
		if err != nil {
			return fmt.Errorf("pidfd_open: %w", err)
		}
		l.self = self
		if l.wake, err = unix.PidfdGetfd(self, l.wakeOut, 0); err != nil {
			return fmt.Errorf("pidfd_getfd: %w", err)
		}
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	l.epfd = epfd
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeKey}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, l.wake, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// canCopy says whether pidfd_getfd works here (Linux 5.6 and later, and
// no seccomp filter in the way), tried on fd while the table is shared.
func canCopy(fd int) bool {
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(self)
	c, err := unix.PidfdGetfd(self, fd, 0)
	if err != nil {
		return false
	}
	unix.Close(c)
	return true
}

// errShared says the thread's table is still the process's.
var errShared = errors.New("epoll: unshare refused")

// ownTable gives the calling thread a table of its own holding only the
// descriptors kept (sorted). close_range with CLOSE_RANGE_UNSHARE copies
// only the numbers below the range, however big the process's table.
func ownTable(kept []int) error {
	top := kept[len(kept)-1]
	if err := unix.CloseRange(uint(top+1), math.MaxUint32, unix.CLOSE_RANGE_UNSHARE); err != nil {
		// close_range needs Linux 5.9 (pidfd_getfd 5.6): unshare, then
		// close one by one.
		if err := unix.Unshare(unix.CLONE_FILES); err != nil {
			return fmt.Errorf("%w: %w", errShared, err)
		}
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("epoll: RLIMIT_NOFILE: %w", err)
		}
		closeSpan(top+1, int(min(lim.Cur, math.MaxInt32))-1)
	}
	next := 0
	for _, k := range kept {
		closeSpan(next, k-1)
		next = k + 1
	}
	return nil
}

// closeSpan closes the descriptors from a to b.
func closeSpan(a, b int) {
	if a > b {
		return
	}
	if unix.CloseRange(uint(a), uint(b), 0) == nil {
		return
	}
	for fd := a; fd <= b; fd++ {
		unix.Close(fd)
	}
}

var runtimeFDs = sync.OnceValue(findRuntimeDescriptors)

// runtimeDescriptors returns, sorted, the descriptors a loop's table keeps:
// the standard streams and the runtime poller's; nil when the poller's
// cannot be told, and so no table of a loop's own can be made. Those found
// once are checked again: one that is no epoll or eventfd descriptor now
// (not the runtime's, closed since and its number reused) is left out.
func runtimeDescriptors() []int {
	found := runtimeFDs()
	if found == nil {
		return nil
	}
	kept := make([]int, 0, len(found))
	for _, fd := range found {
		if fd <= 2 || isPollerKind("/proc/self/fd/"+strconv.Itoa(fd)) {
			kept = append(kept, fd)
		}
	}
	return kept
}

// isPollerKind says whether the descriptor at path (under /proc) is an
// epoll or an eventfd descriptor.
func isPollerKind(path string) bool {
	link, _ := os.Readlink(path)
	return link == "anon_inode:[eventpoll]" || link == "anon_inode:[eventfd]"
}

// findRuntimeDescriptors makes the poller exist (a pipe handed to os does)
// and lists the process's epoll and eventfd descriptors, found before any
// loop made one there: the runtime's (one of each). Any other's kept too
// costs a slot and nothing else; the poller's closed would crash the
// process at its next poll from a loop's thread, so without both found
// (no /proc, say) there are no private tables.
func findRuntimeDescriptors() []int {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	names, err := readDirNames("/proc/self/fd")
	if err != nil {
		return nil
	}
	kept := []int{0, 1, 2}
	var epolls, eventfds int
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 {
			continue
		}
		link, _ := os.Readlink("/proc/self/fd/" + name)
		switch link {
		case "anon_inode:[eventpoll]":
			epolls++
		case "anon_inode:[eventfd]":
			eventfds++
		default:
			continue
		}
		kept = append(kept, fd)
	}
	if epolls == 0 || eventfds == 0 {
		return nil
	}
	slices.Sort(kept)
	return kept
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
