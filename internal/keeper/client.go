package keeper

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon's side: Listen makes the socket a new keeper serves, Dial
// connects to the keeper of the moment.

// Listen makes the keeper's listening socket at path, replacing a stale
// one (a socket no keeper serves any more: nothing else is ever removed),
// and returns its descriptor, close-on-exec, for a new keeper's
// descriptor 3.
func Listen(path string) (int, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return -1, fmt.Errorf("keeper: %s exists and is not a socket", path)
		}
		if served, err := RemoveStale(path); served {
			return -1, fmt.Errorf("keeper: %s is served already", path)
		} else if err != nil {
			return -1, fmt.Errorf("keeper: %w", err)
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("keeper: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("keeper: bind %s: %w", path, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return -1, fmt.Errorf("keeper: listen %s: %w", path, err)
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

// Dial connects to the keeper serving path.
func Dial(path string) (*Client, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("keeper: socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("keeper: connect %s: %w", path, err)
	}
	// A keeper that stops answering must not hold an instance's loop.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return &Client{fd: fd}, nil
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

// RemoveStale removes the socket at path unless a keeper serves it, and
// says whether one does. A path that is not a socket is left alone.
func RemoveStale(path string) (served bool, err error) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		return false, nil
	}
	if c, err := Dial(path); err == nil {
		c.Close()
		return true, nil
	}
	return false, os.Remove(path)
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
