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

// Client is a daemon's connection to the keeper. One exchange at a time.
type Client struct {
	mu sync.Mutex // guards fd, and serialises exchanges
	fd int        // -1 once closed
}

// ErrClosed is the error of a Client after Close, or whose keeper went.
var ErrClosed = errors.New("keeper: connection closed")

// ErrUntrusted is wrapped by Dial's refusal of a socket served by a
// process that is not a keeper the caller knows.
var ErrUntrusted = errors.New("not tend's keeper")

// Dial connects to the keeper serving s, if it is one the caller knows:
// a process of the caller's effective uid whose pid is one of pids (the
// keeper it started, the one its state records). Anything else serving
// the socket (another user's process, a process of ours that is not the
// keeper) is refused with an error wrapping ErrUntrusted, before a word
// is sent: the daemon hands the keeper the masters of root's terminals
// (docs/trust.md#sockets).
func Dial(s Socket, pids ...int) (*Client, error) {
	fd, err := connect(s)
	if err != nil {
		return nil, err
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("keeper: %s: SO_PEERCRED: %w", s.Path, err)
	}
	if euid := uint32(os.Geteuid()); cred.Uid != euid || !slices.Contains(pids, int(cred.Pid)) {
		unix.Close(fd)
		return nil, fmt.Errorf("keeper: %w: %s is served by pid %d of uid %d, and tend's keeper is %s of uid %d",
			ErrUntrusted, s.Path, cred.Pid, cred.Uid, pidList(pids), euid)
	}
	// A keeper that stops answering must not hold an instance's loop.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &Client{fd: fd}, nil
}

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

// Keep hands the keeper a copy of master for run r; the caller keeps its
// own.
func (c *Client) Keep(r Run, master int) error { return c.send("keep "+r.words(), master) }

// Drop says run r is over.
func (c *Client) Drop(r Run) error { return c.send("drop "+r.words(), -1) }

// Quit says the daemon stops cleanly: the keeper exits once it holds
// nothing (runs a daemon left alone keep theirs), and the connection is
// closed.
func (c *Client) Quit() error {
	err := c.send("quit", -1)
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

// Held is a master the keeper holds, handed back: FD is the caller's.
type Held struct {
	Run
	FD int
}

// List returns a copy of every master the keeper holds.
func (c *Client) List() ([]Held, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, ErrClosed
	}
	if err := send(c.fd, "list", -1); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	var out []Held
	fail := func(err error) ([]Held, error) {
		for _, h := range out {
			unix.Close(h.FD)
		}
		return nil, err
	}
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(c.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("keeper: %w", err))
		}
		if n == 0 {
			return fail(ErrClosed)
		}
		fds := rights(oob[:oobn])
		m, err := parse(buf[:n])
		switch {
		case err == nil && m.verb == "end":
			closeAll(fds)
			return out, nil
		case err == nil && m.verb == "held" && len(fds) == 1:
			out = append(out, Held{Run: m.run, FD: fds[0]})
		default:
			closeAll(fds)
			return fail(fmt.Errorf("keeper: unexpected answer %q", buf[:n]))
		}
	}
}

func (c *Client) send(text string, fd int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return ErrClosed
	}
	if err := send(c.fd, text, fd); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	return nil
}

// Close closes the connection; a keeper without a daemon exits once it
// holds nothing.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// Env is a keeper's whole environment: the marker, and one thread for Go
// code, without following the cgroup's CPU limit (the runtime would keep
// the limit's files open for it).
func Env() []string {
	return []string{Marker + "=1", "GOMAXPROCS=1", "GODEBUG=containermaxprocs=0,updatemaxprocs=0"}
}
