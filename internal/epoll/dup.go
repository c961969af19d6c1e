package epoll

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Dup returns a new descriptor in the process's own table for the watched
// one (the same open file description, close-on-exec), for a caller that
// must hold it outside the loop: an upgrade in place, which re-executes
// the process and keeps only the process's table (a loop's table dies
// with its thread).
//
// A loop with a table of its own cannot be reached from the process's
// table: pidfd_getfd copies from a process's table only (a pidfd of the
// loop's thread would do, with PIDFD_THREAD, but that needs Linux 6.9 and
// the daemon runs on 6.1 too). So the loop sends the descriptor through a
// socket pair both tables hold an end of (SCM_RIGHTS), and the caller
// receives it into the process's table. The watch stays as it is; pause it
// first if nothing must read the descriptor meanwhile. Dup must not be
// called from a loop's thread.
func (w *Watch) Dup() (int, error) {
	if OnLoopThread() {
		return -1, errors.New("epoll: Dup from a loop's thread")
	}
	l := w.l
	if !l.private {
		fd, err := -1, ErrClosed
		l.do(func() {
			if !w.closed {
				fd, err = unix.FcntlInt(uintptr(w.fd), unix.F_DUPFD_CLOEXEC, 0)
			}
		})
		return fd, err
	}
	l.xmu.Lock()
	defer l.xmu.Unlock()
	if err := l.xferPairLocked(); err != nil {
		return -1, err
	}
	err := ErrClosed
	l.do(func() {
		if !w.closed {
			err = unix.Sendmsg(l.xfer, []byte{0}, unix.UnixRights(w.fd), nil, 0)
		}
	})
	if err != nil {
		return -1, fmt.Errorf("epoll: passing fd: %w", err)
	}
	return recvFD(l.xferOut)
}

// xferPairLocked makes the loop's socket pair, once: both ends are made in
// the process's table, and the loop's end is copied into the loop's.
func (l *Loop) xferPairLocked() error {
	if l.xferOut >= 0 {
		return nil
	}
	p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("epoll: socketpair: %w", err)
	}
	var c int
	l.do(func() { c, err = l.copyIn(p[0]) })
	unix.Close(p[0]) // the process's copy of the loop's end
	if err != nil {
		unix.Close(p[1])
		return err
	}
	l.xfer, l.xferOut = c, p[1]
	return nil
}

// recvFD receives one descriptor sent with SCM_RIGHTS on sock.
func recvFD(sock int) (int, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		_, oobn, _, _, err := unix.Recvmsg(sock, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("epoll: receiving fd: %w", err)
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return -1, fmt.Errorf("epoll: receiving fd: %d messages, %v", len(msgs), err)
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return -1, fmt.Errorf("epoll: receiving fd: %d fds, %v", len(fds), err)
		}
		return fds[0], nil
	}
}
