package notify

import (
	"errors"
	"fmt"
)

// ErrRead is wrapped by the error OnDrop gets when reading a socket fails
// (no such failure is known for recvmsg on a unix socket); the socket is no
// longer read after it.
var ErrRead = errors.New("notify socket read failed")

// ErrSender is wrapped by the error OnDrop gets for a datagram from a user
// other than root, tend's own and the run's, or without the sender's
// credentials. It counts as malformed.
var ErrSender = fmt.Errorf("%w: from another user", ErrMalformed)

// The reasons DropReason returns: the values of the reason label of the
// daemon's tend_notify_datagrams_dropped_total (internal/metrics).
const (
	DropMalformed = "malformed"  // empty, a NUL byte, no valid assignment, or from another user
	DropOversized = "oversized"  // longer than MaxDatagram
	DropReadError = "read_error" // the read itself failed
)

// DropReasons lists every value DropReason returns, so a metric can show
// each reason from the start, at zero.
var DropReasons = []string{DropMalformed, DropOversized, DropReadError}

// DropReason classifies an error a Socket gave OnDrop: one of the Drop...
// constants. An error it does not know is a read error.
func DropReason(err error) string {
	switch {
	case errors.Is(err, ErrOversized):
		return DropOversized
	case errors.Is(err, ErrMalformed):
		return DropMalformed
	default:
		return DropReadError
	}
}
