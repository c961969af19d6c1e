package cgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/epoll"
)

// Watch calls fn each time the group's cgroup.events changes its populated
// value, with the new value. The kernel signals a change of cgroup.events
// as IN_MODIFY; the Tree has one inotify descriptor for all its groups,
// read by a handler on the shared epoll loop, so fn runs on that loop's
// goroutine and must not block, nor call Watch, nor touch the daemon's
// descriptors (the loop's thread has a table of its own: see
// internal/epoll). Changes are reported against the value
// read when Watch was called: to learn the state now, call Populated after
// Watch (a change in between is then either read or reported).
//
// The watch follows the group's directory, not the inode: when Prepare
// makes the group afresh, the watch carries over. Watching a group that
// does not exist is an error wrapping fs.ErrNotExist. stop ends the watch;
// it does not wait for a call of fn already under way (fn may be running,
// or about to, when stop returns), and may be called more than once, and
// from fn.
func (g *Group) Watch(fn func(populated bool)) (stop func(), err error) {
	if g.err != nil {
		return nil, g.err
	}
	return g.t.w.add(g.path, fn)
}

// watcher is a Tree's inotify descriptor and the groups it watches.
type watcher struct {
	mu     sync.Mutex                         // guards all below
	fd     int                                // the inotify descriptor in the daemon's table; -1 until the first watch
	ew     *epoll.Watch                       // its copy on an epoll loop (KeepOriginal: both stay open)
	closed bool                               // Tree.Close was called
	byWD   map[int32]*watched                 // armed watches by descriptor
	byPath map[string]*watched                // every watched group, armed or not
	nextID uint64                             // for subscriber keys
	buf    [64 * unix.SizeofInotifyEvent]byte // used only by handle, on the loop
}

// watched is one group's subscribers.
type watched struct {
	dir  string
	wd   int32 // -1 while the directory is gone (IN_IGNORED)
	subs map[uint64]*subscriber
}

type subscriber struct {
	fn      func(bool)
	last    bool        // the value last reported, or read at Watch; guarded by watcher.mu
	stopped atomic.Bool // set by stop, read by handle outside the lock
}

func newWatcher() *watcher {
	return &watcher{fd: -1, byWD: map[int32]*watched{}, byPath: map[string]*watched{}}
}

func (w *watcher) add(dir string, fn func(bool)) (func(), error) {
	if epoll.OnLoopThread() {
		// w.fd's number means another file on a loop's thread.
		return nil, errors.New("cgroup: Watch from an epoll handler")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("cgroup: watch on a closed tree")
	}
	if w.fd < 0 {
		if err := w.startLocked(); err != nil {
			return nil, err
		}
	}
	wt := w.byPath[dir]
	if wt == nil {
		wt = &watched{dir: dir, wd: -1, subs: map[uint64]*subscriber{}}
	}
	if wt.wd < 0 {
		if err := w.armLocked(wt); err != nil {
			return nil, err
		}
	}
	p, err := populated(dir)
	if err != nil {
		if len(wt.subs) == 0 {
			w.dropLocked(wt)
		}
		return nil, err
	}
	w.byPath[dir] = wt
	w.nextID++
	id := w.nextID
	s := &subscriber{fn: fn, last: p}
	wt.subs[id] = s
	var once sync.Once
	return func() {
		once.Do(func() {
			s.stopped.Store(true)
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(wt.subs, id)
			if len(wt.subs) == 0 && w.byPath[dir] == wt {
				w.dropLocked(wt)
			}
		})
	}, nil
}

func (w *watcher) startLocked() error {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cgroup: inotify_init1: %w", err)
	}
	// KeepOriginal: watches are added to fd from other goroutines, while
	// the loop reads events from its copy.
	loop, err := epoll.Shared()
	if err == nil {
		w.ew, err = loop.Add(fd, w.handle, epoll.KeepOriginal())
	}
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("cgroup: watching: %w", err)
	}
	w.fd = fd
	return nil
}

// armLocked adds the inotify watch of wt's cgroup.events.
func (w *watcher) armLocked(wt *watched) error {
	file := filepath.Join(wt.dir, "cgroup.events")
	wd, err := unix.InotifyAddWatch(w.fd, file, unix.IN_MODIFY)
	if err != nil {
		return fmt.Errorf("cgroup: watch %s: %w", file, err)
	}
	if wt.wd >= 0 && wt.wd != int32(wd) {
		delete(w.byWD, wt.wd) // the old directory's IN_IGNORED is on its way
	}
	wt.wd = int32(wd)
	w.byWD[wt.wd] = wt
	return nil
}

// dropLocked stops watching wt.
func (w *watcher) dropLocked(wt *watched) {
	if wt.wd >= 0 {
		if epoll.OnLoopThread() {
			// stop called from fn, in the handler: w.fd's number means
			// another file on the loop's thread.
			go w.rmWatch(wt.wd)
		} else {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wt.wd))
		}
		delete(w.byWD, wt.wd)
		wt.wd = -1
	}
	delete(w.byPath, wt.dir)
}

// rmWatch removes the inotify watch wd unless it was armed again
// meanwhile (inotify gives a file's watch the same wd again).
func (w *watcher) rmWatch(wd int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.byWD[wd] == nil {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
	}
}

// rearm watches dir's new cgroup.events after Prepare made it afresh.
func (w *watcher) rearm(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt := w.byPath[dir]; wt != nil && !w.closed {
		_ = w.armLocked(wt) // a failure leaves it unarmed: nothing to report
	}
}

// handle reads the inotify events and reports changed populated values. It
// runs on the epoll loop.
func (w *watcher) handle(fd int) bool {
	var changed []*watched
	for {
		n, err := unix.Read(fd, w.buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break // EAGAIN: all read
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			wt := w.byWD[wd]
			switch {
			case wt == nil:
			case mask&unix.IN_IGNORED != 0:
				// The group was removed (or the watch dropped): a later
				// Prepare rearms it.
				delete(w.byWD, wd)
				wt.wd = -1
			case mask&unix.IN_MODIFY != 0:
				changed = appendOnce(changed, wt)
			}
		}
		w.mu.Unlock()
	}
	type call struct {
		s *subscriber
		p bool
	}
	var calls []call
	for _, wt := range changed {
		p, err := populated(wt.dir)
		if err != nil {
			continue // removed meanwhile: it was empty
		}
		w.mu.Lock()
		for _, s := range wt.subs {
			if s.last != p {
				s.last = p
				calls = append(calls, call{s, p})
			}
		}
		w.mu.Unlock()
	}
	// Outside the lock: fn may call stop.
	for _, c := range calls {
		if !c.s.stopped.Load() {
			c.s.fn(c.p)
		}
	}
	return true
}

func appendOnce(ws []*watched, wt *watched) []*watched {
	for _, x := range ws {
		if x == wt {
			return ws
		}
	}
	return append(ws, wt)
}

func (w *watcher) close() error {
	w.mu.Lock()
	ew, fd := w.ew, w.fd
	w.closed = true
	w.byWD = map[int32]*watched{}
	w.byPath = map[string]*watched{}
	w.ew, w.fd = nil, -1
	w.mu.Unlock()
	if ew == nil {
		return nil
	}
	// Outside mu: Close waits for a handler in flight, which takes mu.
	err := ew.Close()
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}
