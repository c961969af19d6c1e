// Package keeper is the process that owns tty runs' terminals outside the
// daemon and reads them always (docs/terminal.md#the-keeper), as conmon
// does for CRI-O: every byte a run writes to its terminal is read by the
// keeper and appended to the run's log (stream tty, framed as a record a
// line, the rest of a read a partial one), whether a daemon runs or not.
// A run never blocks for want of a daemon, and a daemon killed at any
// moment loses nothing: it had read nothing the log does not hold. The
// daemon keeps a master of its own of each run (input, resizes, the
// answers to the program's queries, and so that a keeper's death loses no
// terminal) and draws the screen from the log, woken by the keeper after
// each write.
//
// The keeper is a small process of tend's own: the daemon re-executes its
// own binary (/proc/self/exe) with argv[0] "tend-keeper" and the marker
// variable TEND_KEEPER, and main (internal/roles) turns that process into
// the keeper with MaybeServe before anything else runs; so does the
// TestMain of any test binary that starts keepers. It runs in a session of
// its own, in the daemon's own cgroup (never a run's), and holds nothing
// but the standard streams on /dev/null, the listening socket the daemon
// made (state_dir/keep.sock, a SOCK_SEQPACKET unix socket, its descriptor
// 3, which the keeper listens on again, to be its peer), the state
// directory (descriptor 4, to open state_dir/logs and to remove the socket
// as it leaves), the connection of the daemon of the moment, and per run:
// the master, a pidfd of the run's leader, and the run's log file while it
// writes it.
//
// Both ends check who is at the other (SO_PEERCRED,
// docs/trust.md#sockets): the keeper serves only its own uid and root, and
// a daemon talks only to a keeper of its own uid whose pid is the one it
// started or the one recorded in the state directory (PIDFile). The
// messages are in message.go.
//
// TICKS, in the messages, is the run's start time (/proc/PID/stat field
// 22), so a pid used again never names a run it is not. A master is read
// until every slave is closed (EIO: the run and whatever it left behind
// are gone from the terminal) or the daemon drops it; the run's leader
// exiting changes nothing, what its children write is read on. A keeper
// with no daemon connected and nothing held exits; so does one a daemon
// leaves with quit, once it holds nothing.
package keeper

import "strconv"

// SocketName is the keeper's socket in the state directory.
const SocketName = "keep.sock"

// Arg0 and Marker make a process the keeper (see MaybeServe).
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
