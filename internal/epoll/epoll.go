// Package epoll watches many descriptors from one goroutine: a thousand
// instances' notify sockets and output pipes cost one goroutine and one
// epoll set, where a reader goroutine each would cost two thousand stacks.
//
// A handler runs on the loop's goroutine whenever its descriptor is
// readable (level-triggered: until it has read everything), hung up, or in
// error. Handlers must not block: they read what is there without waiting,
// hand it on, and return. One that reads a little at a time lets the loop
// take the other descriptors' turns in between.
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

	mu     sync.Mutex // held while h runs, so Close waits for a handler in flight; guards closed
	closed bool
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
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(uint32(w.key)), Pad: int32(uint32(w.key >> 32))}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.forget(w.key)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return w, nil
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
	_ = unix.EpollCtl(w.l.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
	w.l.forget(w.key)
	return unix.Close(w.fd)
}

// fire runs the handler unless the watch was closed meanwhile.
func (w *Watch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && !w.h(w.fd) {
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
