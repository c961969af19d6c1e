package notify

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/epoll"
)

// maxPathLen is the longest socket path clients can use: sun_path is 108
// bytes and C clients (systemd's sd_notify among them) need room for the NUL.
const maxPathLen = 107

// scmMaxFD is the kernel's limit on descriptors in one SCM_RIGHTS message.
const scmMaxFD = 253

// oobSize fits the credentials the kernel adds (SO_PASSCRED) and as many
// descriptors as a sender can pass. Descriptors that do not fit would be
// closed by the kernel anyway (MSG_CTRUNC).
var oobSize = unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(scmMaxFD*4)

// Options tune a Socket. The zero value is ready to use.
type Options struct {
	// Mode is the socket file's permission bits. Zero means 0600: only tend's
	// user (and root) may send. Connecting needs write permission, so a child
	// running as another user needs Owner or a mode such as 0666.
	Mode fs.FileMode

	// Owner, when not nil, becomes the socket file's owner (tend must be
	// root), so a child running as that user can send with the default mode.
	// It is also the one user besides root and tend's own whose datagrams
	// are read (for ListenFD, only that).
	Owner *Owner

	// OnDrop, when not nil, is called on the epoll loop with the reason
	// for each dropped datagram: an error wrapping ErrMalformed or
	// ErrOversized, or ErrRead when reading fails. DropReason names it for
	// a metric's label. It must not block.
	OnDrop func(error)
}

// Owner is a user and group id.
type Owner struct{ UID, GID int }

// ErrPathTooLong is returned by Listen for a path clients cannot connect to:
// longer than sun_path allows. The caller picks a shorter one (tend's
// supervisor uses a short private directory).
var ErrPathTooLong = errors.New("socket path too long")

// Socket is one instance's notify socket. Its fields are set by Listen and
// only read afterwards, except the atomic counters, stale and the Close
// state. It
// has no goroutine of its own: the shared epoll loop reads it (see
// internal/epoll), and owns each datagram's buffer while it handles it.
type Socket struct {
	path    string       // the socket file, absolute: NOTIFY_SOCKET's value
	watch   *epoll.Watch // owns the socket's descriptor
	handler func(Message)
	onDrop  func(error)
	euid    uint32 // tend's uid: its datagrams are read, as root's are
	user    uint32 // the run's user (Options.Owner), or euid

	received  atomic.Uint64
	dropped   atomic.Uint64
	discarded atomic.Uint64 // stale: sent before a Retire (retire.go)

	marker marker     // the datagram Retire sends; set by Listen
	mu     sync.Mutex // guards stale; held while the handler runs
	stale  int        // markers sent and not read yet: what comes before the last is discarded

	closeOnce sync.Once
	closeErr  error // set once under closeOnce
}

// Listen binds a notify socket for path and starts its reader; see
// ListenOptions.
func Listen(path string, handler func(Message)) (*Socket, error) {
	return ListenOptions(path, handler, Options{})
}

// ListenOptions binds a SOCK_DGRAM unix socket at the absolute form of path
// (sd_notify clients accept only absolute paths) and watches it from the
// shared epoll loop, which calls handler for each valid Message, in arrival
// order, including a valid datagram with only unknown keys (a zero Message).
// handler must not block: the loop serves every socket and output pipe of
// the daemon, and once the kernel's small queue is full, clients block in
// sd_notify.
//
// A stale socket file at path is replaced (the daemon's state-directory lock
// makes it ours); any other file there is an error. An absolute path longer
// than 107 bytes is an error wrapping ErrPathTooLong: sd_notify clients need
// the NUL after it in sun_path. There is no abstract-socket fallback: an
// abstract name has no permissions, so any local user could send to it.
//
// SO_PASSCRED is on, so the kernel attaches the sender's credentials: its
// pid goes into Message.SenderPID, for logs, and a datagram from a user
// other than root, tend's own and the run's (Options.Owner) is dropped
// (ErrSender): a socket whose mode lets others in must not let them steer
// a run's health (docs/trust.md#sockets).
func ListenOptions(path string, handler func(Message), opt Options) (*Socket, error) {
	if handler == nil {
		return nil, errors.New("notify: nil handler")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	mode := opt.Mode.Perm()
	if mode == 0 {
		mode = 0o600
	}
	if len(abs) > maxPathLen {
		return nil, fmt.Errorf("notify: %w: %s is %d bytes, the limit is %d", ErrPathTooLong, abs, len(abs), maxPathLen)
	}
	if err := removeStale(abs); err != nil {
		return nil, err
	}
	s := newSocket(abs, handler, opt)
	fd, err := s.bind(mode, opt.Owner)
	if err != nil {
		return nil, err
	}
	loop, err := epoll.Shared()
	if err == nil {
		s.watch, err = loop.Add(fd, s.readable)
	}
	if err != nil {
		unix.Close(fd)
		os.Remove(s.path)
		return nil, fmt.Errorf("notify: %w", err)
	}
	return s, nil
}

// newSocket is a Socket for path, not yet bound or watched.
func newSocket(path string, handler func(Message), opt Options) *Socket {
	euid := uint32(os.Geteuid())
	s := &Socket{path: path, handler: handler, onDrop: opt.OnDrop, marker: newMarker(), euid: euid, user: euid}
	if opt.Owner != nil {
		s.user = uint32(opt.Owner.UID)
	}
	return s
}

// removeStale removes a socket left at path by an earlier daemon.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("notify: %s exists and is not a socket", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("notify: removing stale socket: %w", err)
	}
	return nil
}

// bind creates the non-blocking socket and returns its descriptor.
// SO_PASSCRED is set before bind so that even the first datagram carries
// credentials; the fchmod before bind makes Linux create the file with at
// most mode, so there is no window with looser permissions.
func (s *Socket) bind(mode fs.FileMode, owner *Owner) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("notify: socket: %w", err)
	}
	err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	if err == nil {
		err = unix.Fchmod(fd, uint32(mode))
	}
	if err == nil {
		if err = unix.Bind(fd, &unix.SockaddrUnix{Name: s.path}); err != nil {
			err = &net.OpError{Op: "listen", Net: "unixgram", Addr: &net.UnixAddr{Name: s.path, Net: "unixgram"}, Err: os.NewSyscallError("bind", err)}
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("notify: %w", err)
	}
	if err := s.setOwnerMode(mode, owner); err != nil {
		unix.Close(fd)
		os.Remove(s.path)
		return -1, err
	}
	return fd, nil
}

// setOwnerMode fixes the file's mode exactly (bind applied the umask).
func (s *Socket) setOwnerMode(mode fs.FileMode, owner *Owner) error {
	if owner != nil {
		if err := os.Lchown(s.path, owner.UID, owner.GID); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	if err := os.Chmod(s.path, mode); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// Addr returns the value for NOTIFY_SOCKET: the absolute socket path.
func (s *Socket) Addr() string { return s.path }

// Received returns how many datagrams were read, valid or not, besides
// those a Retire discarded.
func (s *Socket) Received() uint64 { return s.received.Load() }

// Dropped returns how many datagrams were dropped (malformed or oversized).
// They never reached the handler. A datagram with some bad assignments among good ones is not
// dropped: its good ones reach the handler.
func (s *Socket) Dropped() uint64 { return s.dropped.Load() }

// Close removes the socket file, closes the socket and waits for the reader
// to return, so the handler is not called after Close returns. Close must
// not be called from the handler. Later calls return the first result.
func (s *Socket) Close() error {
	s.closeOnce.Do(func() {
		// Remove the path before closing: once it is gone nobody else can bind
		// a new socket there that this Remove would delete.
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.closeErr = fmt.Errorf("notify: %w", err)
		}
		// Once Close returns the loop is not in the handler and never will be.
		if err := s.watch.Close(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("notify: %w", err)
		}
	})
	return s.closeErr
}

// perWake is how many datagrams one socket may hand over before the loop
// serves the others: a flood on one cannot starve the rest.
const perWake = 16

// readable is the epoll handler: it delivers what is queued, up to
// perWake datagrams. An unexpected read error (none is known for recvmsg
// on a unix socket) is reported and ends the watch rather than spinning.
func (s *Socket) readable(fd int) bool {
	for range perWake {
		d, err := s.read(fd)
		if err == unix.EAGAIN {
			return true
		}
		if err != nil {
			if s.onDrop != nil {
				s.onDrop(fmt.Errorf("notify: %w: %w; %s no longer read", ErrRead, err, s.path))
			}
			return false
		}
		s.take(d)
		bufPool.Put(d.buf)
	}
	return true
}

func (s *Socket) drop(err error) {
	s.dropped.Add(1)
	if s.onDrop != nil {
		s.onDrop(err)
	}
}

// Pause stops reading the socket: datagrams wait in its queue (and a
// sender blocks once it is full) until Resume, or until the next daemon
// reads them from the descriptor Dup handed it (tend upgrade).
func (s *Socket) Pause() error { return s.watch.PauseLocked() }

// Resume reads the socket again after Pause.
func (s *Socket) Resume() error { return s.watch.Resume() }

// Dup returns a descriptor of the socket in the process's own table
// (close-on-exec), for handing it over across an exec.
func (s *Socket) Dup() (int, error) { return s.watch.Dup() }

// ListenFD takes up a socket an earlier program of this process bound at
// path and handed over (Dup, then an exec): fd is that socket, already
// bound, and what waits in its queue is read first. ListenFD owns fd,
// also on error (it is closed).
func ListenFD(fd int, path string, handler func(Message), opt Options) (*Socket, error) {
	if handler == nil {
		unix.Close(fd)
		return nil, errors.New("notify: nil handler")
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("notify: %w", err)
	}
	s := newSocket(path, handler, opt)
	loop, err := epoll.Shared()
	if err == nil {
		s.watch, err = loop.Add(fd, s.readable)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("notify: %w", err)
	}
	return s, nil
}
