package notify

import (
	"crypto/rand"
	"sync"

	"golang.org/x/sys/unix"
)

// Retiring a socket for the next run.
//
// A message belongs to the run its socket was opened for. A socket closed
// when its run ends and opened afresh for the next costs a socket, a bind
// and two trips to the epoll loop's thread on the way from one run's exit
// to the next one's fork. Retire keeps the socket instead and draws a line
// in its queue: tend sends a marker datagram to it, and everything the
// loop reads before the marker (what the ended run sent and nobody had
// read yet) is discarded, while what comes after reaches the handler. The
// marker carries a random nonce of the socket's, so no sender can forge
// one, and a NUL byte, so that a marker read by a daemon that does not
// know it (an upgrade handed the socket over) is dropped as malformed.

// markerLen is a marker's size: a NUL byte and the nonce.
const markerLen = 1 + 16

// marker is a socket's marker datagram, made by Listen.
type marker [markerLen]byte

func newMarker() (m marker) {
	_, _ = rand.Read(m[1:]) // never fails on Linux (getrandom)
	return m
}

// markerSender is the unbound datagram socket tend sends markers from,
// shared by every socket of the process.
var markerSender = sync.OnceValues(func() (int, error) {
	return unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
})

// Retire starts the socket afresh for a new run without closing it: every
// datagram queued before Retire returns, and not read by then, is
// discarded; what is sent after it reaches the handler. A message the
// handler got before is the caller's to forget. False when the marker
// cannot be queued (the queue is full, or the socket is closed): the
// caller then closes the socket and opens another.
func (s *Socket) Retire() bool {
	fd, err := markerSender()
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := unix.Sendto(fd, s.marker[:], unix.MSG_DONTWAIT, &unix.SockaddrUnix{Name: s.path}); err != nil {
		return false
	}
	s.stale++
	return true
}

// take handles one datagram read from the socket: a marker ends a stretch
// of stale datagrams, a stale one is discarded, any other is delivered.
// The handler runs under s.mu, so that a message read before a Retire has
// reached it when Retire returns.
func (s *Socket) take(d datagram) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case d.n == markerLen && !d.truncated && [markerLen]byte(d.buf.data[:markerLen]) == s.marker:
		if s.stale > 0 {
			s.stale--
		}
	case s.stale > 0:
		s.discarded.Add(1)
	default:
		s.deliver(d)
	}
}

// Discarded returns how many datagrams were discarded unread by a Retire:
// sent by a run that had ended.
func (s *Socket) Discarded() uint64 { return s.discarded.Load() }
