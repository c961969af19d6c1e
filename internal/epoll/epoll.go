// Package epoll watches many descriptors from one goroutine: a thousand
// instances' notify sockets and output pipes cost one goroutine and one
// epoll set, where a reader goroutine each would cost two thousand stacks.
//
// A handler runs on the loop's goroutine whenever its descriptor is
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
package epoll

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Handler is called with the watched descriptor when it is ready. It
// returns false to stop watching: the loop then closes the descriptor.
type Handler func(fd int) (keep bool)

// Loop is an epoll set and the goroutine that waits on it.
type Loop struct {
	epfd int

	mu      sync.Mutex        // guards watches and next
	watches map[uint64]*Watch // by key, the event's data: a closed fd's number may come back, a key never does
	next    uint64
}

// Watch is one watched descriptor. It owns the descriptor from Add on.
type Watch struct {
	l   *Loop
	key uint64
	fd  int
	h   Handler

	mu     sync.Mutex // held while h runs, so Close waits for a handler in flight; guards closed and paused
	closed bool
	paused bool // out of the set until Resume
}

var (
	shared     *Loop
	sharedErr  error
	sharedOnce sync.Once
)

// Shared returns the process's loop, started on first use: like Go's own
// network poller, one is enough for every caller.
func Shared() (*Loop, error) {
	sharedOnce.Do(func() { shared, sharedErr = New() })
	return shared, sharedErr
}

// New starts a loop. It runs for the life of the process.
func New() (*Loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	l := &Loop{epfd: epfd, watches: map[uint64]*Watch{}}
	go l.run()
	return l, nil
}

// Add watches fd, which must be non-blocking, and calls h whenever it is
// ready. From now on the Watch owns fd: it is closed by Close, or by the
// loop once h returns false. On error fd is left open.
func (l *Loop) Add(fd int, h Handler) (*Watch, error) {
	l.mu.Lock()
	l.next++
	w := &Watch{l: l, key: l.next, fd: fd, h: h}
	l.watches[w.key] = w
	l.mu.Unlock()
	if err := w.arm(); err != nil {
		l.forget(w.key)
		return nil, err
	}
	return w, nil
}

// arm puts the descriptor in the set.
func (w *Watch) arm() error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(uint32(w.key)), Pad: int32(uint32(w.key >> 32))}
	if err := unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_ADD, w.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// PauseLocked takes the descriptor out of the set until Resume: the
// handler is not called, whatever arrives or hangs up meanwhile (a
// level-triggered hang-up cannot be disarmed any other way). Call it only
// from the handler, which runs with the watch's lock held.
func (w *Watch) PauseLocked() error {
	if w.closed || w.paused {
		return nil
	}
	if err := unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	w.paused = true
	return nil
}

// Resume puts a paused descriptor back in the set: the handler runs again
// as soon as it is ready, at once if something waited. A watch that is
// not paused, or closed, is left as it is. Not from the handler.
func (w *Watch) Resume() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.paused {
		return nil
	}
	if err := w.arm(); err != nil {
		return err
	}
	w.paused = false
	return nil
}

func (l *Loop) forget(key uint64) {
	l.mu.Lock()
	delete(l.watches, key)
	l.mu.Unlock()
}

// Close stops watching and closes the descriptor. When it returns, the
// handler is not running and will not run again. It must not be called
// from the handler itself (which returns false instead). Later calls
// return nil.
func (w *Watch) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	return w.closeLocked()
}

func (w *Watch) closeLocked() error {
	w.closed = true
	// Leave the set before closing: a closed fd leaves it by itself only
	// once no duplicate of it (a forked child's, say) remains.
	if !w.paused {
		_ = unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
	}
	w.l.forget(w.key)
	return unix.Close(w.fd)
}

// fire runs the handler unless the watch was closed or paused meanwhile
// (an event of the same batch may name a watch its handler just paused).
func (w *Watch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && !w.paused && !w.h(w.fd) {
		_ = w.closeLocked()
	}
}

// run is the loop's goroutine.
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
			l.mu.Lock()
			w := l.watches[key]
			l.mu.Unlock()
			if w != nil {
				w.fire()
			}
		}
	}
}
