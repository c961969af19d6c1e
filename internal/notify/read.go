package notify

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// buffer is the memory for one recvmsg. Buffers come from a pool and are
// taken only once a socket is readable, so a thousand idle sockets hold
// none.
type buffer struct {
	data []byte // MaxDatagram bytes
	oob  []byte // oobSize bytes
}

var bufPool = sync.Pool{New: func() any {
	return &buffer{data: make([]byte, MaxDatagram), oob: make([]byte, oobSize)}
}}

// datagram is one datagram as read, its descriptors already closed.
type datagram struct {
	buf       *buffer
	n         int    // bytes of buf.data received
	truncated bool   // longer than MaxDatagram
	pid       int32  // sender pid from SCM_CREDENTIALS, 0 when unknown
	uid       uint32 // sender uid from SCM_CREDENTIALS, if cred
	cred      bool   // the kernel said who sent it
}

// read reads one queued datagram from the non-blocking fd; unix.EAGAIN
// means none is queued.
func (s *Socket) read(fd int) (datagram, error) {
	d := datagram{buf: bufPool.Get().(*buffer)}
	for {
		// MSG_CMSG_CLOEXEC: a child forked by the supervisor before the
		// close in readControl must not inherit a passed descriptor.
		n, oobn, flags, _, err := unix.Recvmsg(fd, d.buf.data, d.buf.oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			bufPool.Put(d.buf)
			return datagram{}, err
		}
		d.n = n
		d.truncated = flags&unix.MSG_TRUNC != 0
		d.readControl(d.buf.oob[:oobn])
		return d, nil
	}
}

// readControl closes every passed descriptor at once (systemd-notify's
// barrier waits for exactly that) and notes the sender's pid and uid.
func (d *datagram) readControl(oob []byte) {
	for len(oob) >= unix.CmsgLen(0) {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return // the kernel writes well-formed headers; nothing more to find
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET {
			continue
		}
		scm := unix.SocketControlMessage{Header: h, Data: data}
		switch h.Type {
		case unix.SCM_RIGHTS:
			fds, _ := unix.ParseUnixRights(&scm)
			for _, fd := range fds {
				unix.Close(fd)
			}
		case unix.SCM_CREDENTIALS:
			if cred, err := unix.ParseUnixCredentials(&scm); err == nil {
				d.pid, d.uid, d.cred = cred.Pid, cred.Uid, true
			}
		}
	}
}

// deliver parses d and hands it to the handler, or drops it.
func (s *Socket) deliver(d datagram) {
	s.received.Add(1)
	if !d.cred || d.uid != 0 && d.uid != s.euid && d.uid != s.user {
		s.drop(fmt.Errorf("%w (uid %d)", ErrSender, d.uid))
		return
	}
	if d.truncated {
		s.drop(fmt.Errorf("%w: longer than %d bytes", ErrOversized, MaxDatagram))
		return
	}
	m, err := Parse(d.buf.data[:d.n])
	if err != nil {
		s.drop(err)
		return
	}
	m.SenderPID = int(d.pid)
	s.handler(m)
}
