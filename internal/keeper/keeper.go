// Package keeper holds the masters of tty runs' terminals outside the
// daemon, so that a terminal outlives the daemon as its run does
// (docs/terminal.md). A daemon killed outright closes its copies; the
// keeper's copy keeps the terminal open, the run goes on (and blocks once
// the terminal is full, losing nothing), and the next daemon takes the
// master back and reads on.
//
// The keeper is a small process of tend's own: the daemon re-executes its
// own binary (/proc/self/exe) with argv[0] "tend-keeper" and the marker
// variable TEND_KEEPER, and main (internal/roles) turns that process into
// the keeper with MaybeServe before anything else runs, as it does the
// exec shim; so does the TestMain of any test binary that starts keepers. It runs in a session of its
// own, in the daemon's own cgroup (never a run's), and holds nothing but
// the standard streams on /dev/null, the listening socket the daemon made
// (state_dir/keep.sock, a SOCK_SEQPACKET unix socket, its descriptor 3,
// which the keeper listens on again, to be its peer), the state directory (descriptor 4,
// to remove the socket as it leaves), the connection of the daemon of the
// moment, and per run it holds: the master and a pidfd of the run's
// leader.
//
// Both ends check who is at the other (SO_PEERCRED,
// docs/trust.md#sockets): the keeper serves only its own uid and root, and
// a daemon talks only to a keeper of its own uid whose pid is the one it
// started or the one recorded in the state directory (PIDFile).
//
// The protocol is one datagram per message, words separated by spaces:
//
//	keep ID PID TICKS   + the master (SCM_RIGHTS): hold it for run PID of ID
//	drop ID PID TICKS   the run is over: close it
//	list                answered by "held ID PID TICKS" + the master, one
//	                    a run, then "end"
//	quit                the daemon stops cleanly: exit once nothing is held
//
// TICKS is the run's start time (/proc/PID/stat field 22), so a pid used
// again never names a run it is not. A master is dropped when the daemon
// says so, or when the run's leader exits (its pidfd says so): whatever
// the run wrote and no daemon read then is lost, as a run's output is
// when it ends while no daemon runs. A keeper with no daemon connected and
// nothing held exits; so does one a daemon leaves with quit.
package keeper

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SocketName is the keeper's socket in the state directory.
const SocketName = "keep.sock"

// Arg0 and Marker make a process the keeper (see init).
const (
	Arg0   = "tend-keeper"
	Marker = "TEND_KEEPER"
)

// ListenFD is the listening socket's descriptor in the keeper, DirFD the
// state directory it is in.
const (
	ListenFD = 3
	DirFD    = 4
)

// Run is one run's terminal as the keeper knows it.
type Run struct {
	ID    string // the instance, NAME:K
	PID   int    // the run's leader
	Ticks uint64 // its start time, /proc/PID/stat field 22
}

func (r Run) words() string {
	return r.ID + " " + strconv.Itoa(r.PID) + " " + strconv.FormatUint(r.Ticks, 10)
}

// message is one datagram: its verb, the run it names, if any.
type message struct {
	verb string
	run  Run
}

// maxMessage bounds a datagram: a verb, an id of at most 63+1+5 bytes, two
// numbers.
const maxMessage = 256

var errBadMessage = errors.New("keeper: bad message")

// parse reads a datagram.
func parse(b []byte) (message, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return message{}, errBadMessage
	}
	m := message{verb: f[0]}
	switch m.verb {
	case "keep", "drop", "held":
		if len(f) != 4 {
			return message{}, errBadMessage
		}
		pid, err1 := strconv.Atoi(f[2])
		ticks, err2 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil || pid <= 0 || f[1] == "" {
			return message{}, errBadMessage
		}
		m.run = Run{ID: f[1], PID: pid, Ticks: ticks}
	case "list", "end", "quit":
		if len(f) != 1 {
			return message{}, errBadMessage
		}
	default:
		return message{}, fmt.Errorf("%w: unknown verb %q", errBadMessage, m.verb)
	}
	return m, nil
}
