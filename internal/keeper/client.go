package keeper

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/statedir"
)

// The daemon's side: Listen makes the socket a new keeper serves, Dial
// connects to the keeper of the moment and makes sure it is one.

// Socket is where the keeper's socket is: SocketName in the state
// directory open as DirFD. It is bound and reached through that descriptor
// (statedir.Via), never by its path looked up again; Path names it in
// messages.
type Socket struct {
	DirFD int
	Path  string
}

// At is the keeper's socket in the state directory d.
func At(d *statedir.Dir) Socket { return Socket{DirFD: d.FD(), Path: d.Join(SocketName)} }

// via is the path that reaches the socket through DirFD.
func (s Socket) via() string { return statedir.Via(s.DirFD, SocketName, s.Path) }

// Listen makes the keeper's socket, replacing one left there (the caller
// makes one only when no keeper it trusts serves it: nothing but a socket
// is ever removed), and returns its descriptor, listening and
// close-on-exec, for a new keeper's descriptor 3. The keeper listens on it
// again as it starts (serve), so that the kernel names the keeper, not the
// daemon that made the socket, as the peer of the connections after that
// (SO_PEERCRED): a daemon can then tell it from any other process.
func Listen(s Socket) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(s.DirFD, SocketName, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return -1, fmt.Errorf("keeper: %s exists and is not a socket", s.Path)
		}
		if err := unix.Unlinkat(s.DirFD, SocketName, 0); err != nil && err != unix.ENOENT {
			return -1, fmt.Errorf("keeper: removing %s: %w", s.Path, err)
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("keeper: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: s.via()}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("keeper: bind %s: %w", s.Path, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(s.DirFD, SocketName, 0)
		return -1, fmt.Errorf("keeper: listen %s: %w", s.Path, err)
	}
	return fd, nil
}

// Client is a daemon's connection to the keeper: requests, one at a time,
// and the keeper's notices, read on a goroutine of the Client's own and
// handed to Notices.
type Client struct {
	mu      sync.Mutex // guards fd, and serialises requests
	fd      int        // -1 once closed
	version int        // the keeper's: 1 for a keeper that only holds masters (see Old)
	n       Notices
	replies chan Message  // dropped, from the reader
	gone    chan struct{} // closed when the reader stops: the keeper went, or Close
}

// Notices are what a keeper tells its daemon unasked; each is called on
// the Client's reading goroutine and must not block for long, nor call the
// Client. Any may be nil.
type Notices struct {
	Wrote  func(id string) // the log of id gained records
	Ended  func(r Run)     // run r's terminal hung up, all it wrote is in its log
	Failed func(m Failed)  // output could not be written to a log
	Healed func(id string) // id's log is written again
}

// ErrClosed is the error of a Client after Close, or whose keeper went.
var ErrClosed = errors.New("keeper: connection closed")

// ErrUntrusted is wrapped by Dial's refusal of a socket served by a
// process that is not a keeper the caller knows.
var ErrUntrusted = errors.New("not tend's keeper")

// ErrNoAnswer is a request's error when the keeper did not answer in time.
var ErrNoAnswer = errors.New("keeper: no answer")

// answerTimeout bounds the wait for an answer: a keeper that stops
// answering must not hold an instance's loop.
const answerTimeout = 10 * time.Second

// Dial connects to the keeper serving s, if it is one the caller knows:
// a process of the caller's effective uid whose pid is one of pids (the
// keeper it started, the one its state records). Anything else serving
// the socket (another user's process, a process of ours that is not the
// keeper) is refused with an error wrapping ErrUntrusted, before a word
// is sent: the daemon hands the keeper the masters of root's terminals
// (docs/trust.md#sockets). It says hello and takes a copy of every master
// the keeper holds; the caller owns them. A keeper of version 1 ignores
// the hello: Old says so.
func Dial(s Socket, n Notices, pids ...int) (*Client, []Master, error) {
	fd, err := connect(s)
	if err != nil {
		return nil, nil, err
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("keeper: %s: SO_PEERCRED: %w", s.Path, err)
	}
	if euid := uint32(os.Geteuid()); cred.Uid != euid || !slices.Contains(pids, int(cred.Pid)) {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("keeper: %w: %s is served by pid %d of uid %d, and tend's keeper is %s of uid %d",
			ErrUntrusted, s.Path, cred.Pid, cred.Uid, pidList(pids), euid)
	}
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) // the greeting's answers only
	c := &Client{fd: fd, version: 1, n: n, replies: make(chan Message, 16), gone: make(chan struct{})}
	masters, err := c.greet()
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	if c.Old() {
		close(c.gone)
		return c, masters, nil
	}
	var none unix.Timeval
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &none)
	go c.read(fd)
	return c, masters, nil
}

// greet says hello and lists: a keeper of this version answers hello
// first, one of version 1 only the list.
func (c *Client) greet() ([]Master, error) {
	if err := send(c.fd, Hello{Version: Version}, -1, 0); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	if err := send(c.fd, List{}, -1, 0); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	var out []Master
	fail := func(err error) ([]Master, error) {
		for _, h := range out {
			unix.Close(h.FD)
		}
		return nil, err
	}
	for {
		m, fds, err := receive(c.fd)
		if err != nil {
			return fail(err)
		}
		switch m := m.(type) {
		case Hello:
			c.version = m.Version
		case Held:
			if len(fds) == 1 {
				out = append(out, Master{Run: m.Run, FD: fds[0]})
				continue
			}
		case End:
			closeAll(fds)
			return out, nil
		}
		closeAll(fds)
	}
}

// receive reads one message, and the descriptors it carried.
func receive(fd int) (Message, []int, error) {
	buf := make([]byte, maxMessage+1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil, nil, ErrNoAnswer
		}
		if err != nil {
			return nil, nil, fmt.Errorf("keeper: %w", err)
		}
		if n == 0 {
			return nil, nil, ErrClosed
		}
		fds := rights(oob[:oobn])
		m, err := Parse(buf[:n])
		if err != nil {
			closeAll(fds)
			continue // a message of a later version's: not for this daemon
		}
		return m, fds, nil
	}
}

// read hands the keeper's notices on and its answers to the request that
// waits for them, until the keeper goes or Close.
func (c *Client) read(fd int) {
	defer close(c.gone)
	for {
		m, fds, err := receive(fd)
		if err != nil {
			return
		}
		closeAll(fds)
		switch m := m.(type) {
		case Wrote:
			if c.n.Wrote != nil {
				c.n.Wrote(m.ID)
			}
		case Ended:
			if c.n.Ended != nil {
				c.n.Ended(m.Run)
			}
		case Failed:
			if c.n.Failed != nil {
				c.n.Failed(m)
			}
		case Healed:
			if c.n.Healed != nil {
				c.n.Healed(m.ID)
			}
		case Dropped:
			select {
			case c.replies <- m:
			default: // nobody waits for it any more
			}
		}
	}
}

// Old says the keeper is of version 1: it only holds masters, and reads
// none. The daemon takes its masters and hands them to a keeper of its
// own version (Retire tells the old one to go).
func (c *Client) Old() bool { return c.version < 2 }

// Version is the keeper's protocol version.
func (c *Client) Version() int { return c.version }

// connect connects to whatever serves s.
func connect(s Socket) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("keeper: socket: %w", err)
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: s.via()})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("keeper: connect %s: %w", s.Path, err)
	}
	return fd, nil
}

// pidList words the pids a keeper may have.
func pidList(pids []int) string {
	var known []string
	for _, p := range pids {
		if p > 0 && !slices.Contains(known, strconv.Itoa(p)) {
			known = append(known, strconv.Itoa(p))
		}
	}
	switch len(known) {
	case 0:
		return "none started or recorded"
	case 1:
		return "pid " + known[0]
	}
	return "pid " + strings.Join(known, " or ")
}

// Keep hands the keeper a copy of master for run r, to read into log; the
// caller keeps its own.
func (c *Client) Keep(r Run, log LogSpec, master int) error {
	return c.send(Keep{Run: r, Log: log}, master)
}

// Drop says run r is over, and returns once the keeper has written all it
// read of it (and closed its master).
func (c *Client) Drop(r Run) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return ErrClosed
	}
	for drained := false; !drained; { // answers to a Drop that timed out
		select {
		case <-c.replies:
		default:
			drained = true
		}
	}
	if err := send(c.fd, Drop{r}, -1, 0); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	timeout := time.NewTimer(answerTimeout)
	defer timeout.Stop()
	for {
		select {
		case m := <-c.replies:
			if m == (Dropped{r}) {
				return nil
			}
		case <-c.gone:
			return ErrClosed
		case <-timeout.C:
			return ErrNoAnswer
		}
	}
}

// Retire tells a keeper of version 1 to let go of runs and to go: its
// masters were handed to a keeper of this version. The connection is
// closed.
func (c *Client) Retire(runs []Run) {
	for _, r := range runs {
		_ = c.send(Drop{r}, -1)
	}
	_ = c.Quit()
}

// Quit says the daemon stops cleanly: the keeper exits once it holds
// nothing (runs a daemon left alone keep theirs), and the connection is
// closed.
func (c *Client) Quit() error {
	err := c.send(Quit{}, -1)
	c.Close()
	return err
}

// RemoveStale removes the socket s unless something serves it, and says
// whether something does. A path that is not a socket is left alone.
func RemoveStale(s Socket) (served bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(s.DirFD, SocketName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return false, nil
	}
	if fd, err := connect(s); err == nil {
		unix.Close(fd)
		return true, nil
	}
	if err := unix.Unlinkat(s.DirFD, SocketName, 0); err != nil && err != unix.ENOENT {
		return false, fmt.Errorf("keeper: removing %s: %w", s.Path, err)
	}
	return false, nil
}

// Master is a master the keeper holds, handed back: FD is the caller's.
type Master struct {
	Run
	FD int
}

func (c *Client) send(m Message, fd int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return ErrClosed
	}
	if err := send(c.fd, m, fd, 0); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	return nil
}

// Done is closed when the connection is: the keeper went, or Close.
func (c *Client) Done() <-chan struct{} { return c.gone }

// Close closes the connection; a keeper without a daemon exits once it
// holds nothing.
func (c *Client) Close() {
	c.mu.Lock()
	fd := c.fd
	c.fd = -1
	c.mu.Unlock()
	if fd < 0 {
		return
	}
	_ = unix.Shutdown(fd, unix.SHUT_RDWR) // wakes the reader
	<-c.gone
	unix.Close(fd)
}

// Env is a keeper's whole environment: the marker, and one thread for Go
// code, without following the cgroup's CPU limit (the runtime would keep
// the limit's files open for it).
func Env() []string {
	return []string{Marker + "=1", "GOMAXPROCS=1", "GODEBUG=containermaxprocs=0,updatemaxprocs=0"}
}
