// Package epoll watches many descriptors from few goroutines: ten thousand
// instances' notify sockets and output pipes cost a loop or two (a
// goroutine, an OS thread and an epoll set each), where a reader goroutine
// each would cost thirty thousand stacks.
//
// A handler runs on its loop's goroutine whenever its descriptor is
// readable (level-triggered: until it has read everything), hung up, or in
// error. Handlers must not block: they read what is there without waiting,
// hand it on, and return. One that reads a little at a time lets the loop
// take the other descriptors' turns in between.
//
// A handler with nowhere to put what it would read pauses its watch
// (PauseLocked): the descriptor leaves the set, so the loop neither calls
// it nor spins on it, and the data waits in the kernel (a pipe's writer
// blocks once the pipe is full: backpressure). Whoever drains the place
// calls Resume.
//
// # Tables of their own
//
// RLIMIT_NOFILE bounds descriptor numbers within one descriptor table, and
// a thread can have a table of its own (unshare(CLONE_FILES)). Ten thousand
// runs watch thirty thousand descriptors (each run's notify socket and its
// stdout and stderr pipes), more than the 20,000 a common hard limit allows
// in one table, and the daemon cannot raise a hard limit without
// CAP_SYS_RESOURCE. So each loop runs on an OS thread locked to its
// goroutine for good, with a table of its own, and what it watches lives
// there only: Add copies the caller's descriptor into the loop's table
// (pidfd_getfd on the process's own pidfd, on the loop's thread), watches
// the copy and closes the caller's. Loops form a pool (Shared): when every
// loop's table is near the limit another loop starts, so the watched
// descriptors spread over as many tables as they need. Where the kernel
// refuses (pidfd_getfd needs Linux 5.6, or unshare fails), one loop watches
// the caller's descriptors in the process's own table, as before.
//
// Everything done with a watched descriptor happens on its loop's thread:
// the handler's reads, PauseLocked and Resume, Close, and Do (through which
// code outside the handler reads it). Other goroutines' requests reach the
// loop through a queue and an eventfd in its set; each waits until the loop
// has carried it out, between two handler calls.
//
// The rules that follow:
//
//   - A handler runs on a thread whose table is not the daemon's. Its fd is
//     the number in the loop's table; a number from the daemon's table means
//     another file there, or none (OnLoopThread tells where the caller
//     runs). It must never create an os.File, net.Conn or anything else the
//     runtime's poller or a finalizer may close later from another thread.
//     A descriptor it opens, or receives (SCM_RIGHTS), lands in the loop's
//     table and must be closed there before it returns (the notify socket
//     closes what a datagram passes at once; the cgroup watcher's reads
//     open and close cgroup.events there).
//   - A handler must not call Add (the descriptor it would pass is not the
//     daemon's), nor wait on a watch of another loop (Close, Resume, Do):
//     two loops could wait for each other. Its own loop's watches it may
//     pause, resume, close and Do: that runs at once.
//   - Nobody may hold a lock a handler takes while waiting on a loop (Add,
//     Close, Resume, Do): the loop would wait for the lock, and the caller
//     for the loop.
//   - A caller that keeps using its descriptor after Add (the cgroup
//     watcher adds inotify watches to its descriptor from other goroutines)
//     passes KeepOriginal: both numbers then name one open file
//     description, and the caller closes its own.
package epoll

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Handler is called with the watched descriptor, its number in the loop's
// table, when it is ready. It returns false to stop watching: the loop
// then closes the descriptor.
type Handler func(fd int) (keep bool)

// ErrClosed is Do's error for a watch that was closed.
var ErrClosed = errors.New("epoll: watch closed")

// wakeKey is the event data of the loop's eventfd; watches' keys start at 1.
const wakeKey = 0

// Loop is an epoll set and the goroutine, locked to its thread, that waits
// on it.
type Loop struct {
	epfd    int  // the epoll set, in the loop's table
	wake    int  // the eventfd that wakes the loop for requests, in the loop's table
	wakeOut int  // the same eventfd in the process's table: other threads write it
	self    int  // a pidfd of the process in the loop's table (Add copies through it); -1 if not private
	private bool // the loop has a descriptor table of its own
	tid     int  // the loop's thread

	qmu   sync.Mutex // guards queue and woken
	queue []func()   // requests from other goroutines, run on the loop's thread
	woken bool       // the eventfd was written since the loop last took the queue

	load atomic.Int64 // open watches: the pool picks a loop with room by it

	xmu     sync.Mutex // guards xfer and xferOut, and one Dup's send and receive at a time
	xfer    int        // the loop's end of the socket pair Dup passes descriptors through; -1 until made
	xferOut int        // its other end, in the process's table

	// The loop goroutine's own.
	watches map[uint64]*Watch // by key, the event's data: a closed fd's number may come back, a key never does
	next    uint64
	spare   []func() // the queue's other slice
}

// Watch is one watched descriptor. It owns the descriptor (its loop's
// copy) from Add on.
type Watch struct {
	l   *Loop
	key uint64
	h   Handler

	// Set and read only on the loop's thread.
	fd     int // in the loop's table
	closed bool
	paused bool // out of the set until Resume
}

// Option tunes Add.
type Option func(*addOptions)

type addOptions struct {
	keep  bool
	bound func(*Watch)
}

// KeepOriginal leaves the caller's descriptor open: the Watch owns a copy
// (one open file description under two numbers), and the caller goes on
// using its own and closes it when done.
func KeepOriginal() Option { return func(o *addOptions) { o.keep = true } }

// OnWatch calls fn with the new Watch on the loop's thread before the
// descriptor enters the set, so before the handler's first call, which may
// come before Add returns. fn runs only when Add succeeds. It must not
// block (the rules for handlers apply).
func OnWatch(fn func(*Watch)) Option { return func(o *addOptions) { o.bound = fn } }

// Add watches fd, which must be non-blocking, and calls h whenever it is
// ready. From now on the Watch owns the descriptor: the loop's copy is
// closed by Close, or by the loop once h returns false, and the caller's
// fd is closed when Add returns (unless KeepOriginal). On error fd is left
// open. Add must not be called from a handler.
func (l *Loop) Add(fd int, h Handler, opts ...Option) (*Watch, error) {
	var o addOptions
	for _, opt := range opts {
		opt(&o)
	}
	if OnLoopThread() {
		return nil, errors.New("epoll: Add from a loop's thread, where the descriptor's number is not the caller's")
	}
	w := &Watch{l: l, h: h}
	var err error
	l.do(func() { err = l.addHere(w, fd, o) })
	if err != nil {
		return nil, err
	}
	if l.private && !o.keep {
		unix.Close(fd)
	}
	return w, nil
}

// addHere puts w, with fd or its copy, in the set. On the loop's thread.
func (l *Loop) addHere(w *Watch, fd int, o addOptions) error {
	own := fd
	if l.private || o.keep {
		c, err := l.copyIn(fd)
		if err != nil {
			return err
		}
		own = c
	}
	l.next++
	w.key, w.fd = l.next, own
	if err := l.arm(w); err != nil {
		if own != fd {
			unix.Close(own)
		}
		return err
	}
	l.watches[w.key] = w
	l.load.Add(1)
	if o.bound != nil {
		o.bound(w)
	}
	return nil
}

// copyIn returns a copy of the process's fd in the loop's table.
func (l *Loop) copyIn(fd int) (int, error) {
	if l.private {
		c, err := unix.PidfdGetfd(l.self, fd, 0) // close-on-exec, always
		if err != nil {
			return -1, fmt.Errorf("pidfd_getfd: %w", err)
		}
		return c, nil
	}
	c, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("fcntl F_DUPFD_CLOEXEC: %w", err)
	}
	return c, nil
}

// arm puts the watch's descriptor in the set.
func (l *Loop) arm(w *Watch) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(uint32(w.key)), Pad: int32(uint32(w.key >> 32))}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, w.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// PauseLocked takes the descriptor out of the set until Resume: the
// handler is not called, whatever arrives or hangs up meanwhile (a
// level-triggered hang-up cannot be disarmed any other way). Call it from
// the handler (the loop holds the watch while it runs); from elsewhere it
// waits for the loop.
func (w *Watch) PauseLocked() error {
	var err error
	w.l.do(func() {
		if w.closed || w.paused {
			return
		}
		if err = unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil); err != nil {
			err = fmt.Errorf("epoll_ctl: %w", err)
			return
		}
		w.paused = true
	})
	return err
}

// Resume puts a paused descriptor back in the set: the handler runs again
// as soon as it is ready, at once if something waited. A watch that is
// not paused, or closed, is left as it is.
func (w *Watch) Resume() error {
	var err error
	w.l.do(func() {
		if w.closed || !w.paused {
			return
		}
		if err = w.l.arm(w); err == nil {
			w.paused = false
		}
	})
	return err
}

// Close stops watching and closes the descriptor. When it returns, the
// handler is not running and will not run again. Later calls return nil.
func (w *Watch) Close() error {
	var err error
	w.l.do(func() { err = w.l.closeHere(w) })
	return err
}

// Do calls fn on the loop's thread with the descriptor's number there,
// between handler calls (so never while the handler runs), paused or not:
// the way to read the descriptor outside the handler. It returns ErrClosed,
// without calling fn, once the watch is closed. fn must not block.
func (w *Watch) Do(fn func(fd int)) error {
	err := ErrClosed
	w.l.do(func() {
		if !w.closed {
			err = nil
			fn(w.fd)
		}
	})
	return err
}

// closeHere closes w on the loop's thread.
func (l *Loop) closeHere(w *Watch) error {
	if w.closed {
		return nil
	}
	w.closed = true
	// Leave the set before closing: a closed fd leaves it by itself only
	// once no duplicate of it (a KeepOriginal caller's, say) remains.
	if !w.paused {
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
	}
	delete(l.watches, w.key)
	l.load.Add(-1)
	return unix.Close(w.fd)
}

// fire runs the handler unless the watch was closed or paused meanwhile
// (an event of the same batch may name a watch its handler just paused).
func (l *Loop) fire(w *Watch) {
	if w.closed || w.paused {
		return
	}
	if !w.h(w.fd) {
		_ = l.closeHere(w)
	}
}

// do runs fn on the loop's thread and returns once it has: at once when
// called there (from a handler), else between two handler calls.
func (l *Loop) do(fn func()) {
	if unix.Gettid() == l.tid {
		fn()
		return
	}
	done := make(chan struct{})
	l.post(func() {
		fn()
		close(done)
	})
	<-done
}

// post queues fn for the loop and wakes it unless a wake is on its way.
func (l *Loop) post(fn func()) {
	l.qmu.Lock()
	l.queue = append(l.queue, fn)
	wake := !l.woken
	l.woken = true
	l.qmu.Unlock()
	if !wake {
		return
	}
	if OnLoopThread() {
		// This thread's table is another loop's, where wakeOut's number
		// means nothing: a goroutine runs on a thread of the process's.
		go l.poke()
		return
	}
	l.poke()
}

// poke writes the eventfd through the process's table.
func (l *Loop) poke() {
	one := [8]byte{1} // the eventfd counter is host-endian; 1 in any byte order is nonzero
	for {
		if _, err := unix.Write(l.wakeOut, one[:]); err != unix.EINTR {
			return
		}
	}
}

// serve runs the queued requests.
func (l *Loop) serve() {
	var b [8]byte
	_, _ = unix.Read(l.wake, b[:]) // before taking the queue: a later request writes again
	l.qmu.Lock()
	q := l.queue
	l.queue, l.spare = l.spare[:0], nil
	l.woken = false
	l.qmu.Unlock()
	for i, fn := range q {
		fn()
		q[i] = nil
	}
	l.spare = q[:0]
}

// run is the loop's goroutine, on its locked thread.
func (l *Loop) run() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil {
			if err != unix.EINTR {
				// Not expected (EBADF, EFAULT, EINVAL are bugs); do not spin.
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		for i := range n {
			key := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32
			if key == wakeKey {
				l.serve()
				continue
			}
			if w := l.watches[key]; w != nil {
				l.fire(w)
			}
		}
	}
}
