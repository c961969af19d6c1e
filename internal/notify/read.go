package notify

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// buffer is the memory for one recvmsg. Buffers come from a pool and are
// taken only once the socket is readable, so a thousand idle sockets hold
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
	hasCreds  bool   // whether pid and uid are known
	pid       int32  // sender pid from SCM_CREDENTIALS
	uid       uint32 // sender uid from SCM_CREDENTIALS
}

// read blocks in the Go netpoller until a datagram arrives and returns it.
// The error wraps net.ErrClosed once the socket is closed.
func (s *Socket) read() (datagram, error) {
	var d datagram
	var rerr error
	err := s.raw.Read(func(fd uintptr) bool {
		if d.buf == nil {
			d.buf = bufPool.Get().(*buffer)
		}
		for {
			// MSG_CMSG_CLOEXEC: a child forked by the supervisor before the
			// close below must not inherit a passed descriptor.
			n, oobn, flags, _, err := unix.Recvmsg(int(fd), d.buf.data, d.buf.oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
			switch err {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				// Nothing queued: give the buffer back while we wait.
				bufPool.Put(d.buf)
				d.buf = nil
				return false
			case nil:
				d.n = n
				d.truncated = flags&unix.MSG_TRUNC != 0
				d.readControl(d.buf.oob[:oobn])
			default:
				rerr = err
			}
			return true
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil && d.buf != nil {
		bufPool.Put(d.buf)
		d.buf = nil
	}
	return d, err
}

// readControl closes every passed descriptor at once (systemd-notify's
// barrier waits for exactly that) and notes the sender's credentials.
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
				d.hasCreds, d.pid, d.uid = true, cred.Pid, cred.Uid
			}
		}
	}
}

// deliver parses d and hands it to the handler, or drops it.
func (s *Socket) deliver(d datagram) {
	s.received.Add(1)
	if d.truncated {
		s.drop(fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxDatagram))
		return
	}
	if s.allowUID != nil && (!d.hasCreds || !s.allowUID[d.uid]) {
		s.drop(fmt.Errorf("notify: %w: uid %d (pid %d) on %s", ErrNotAdmitted, d.uid, d.pid, s.addr))
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
