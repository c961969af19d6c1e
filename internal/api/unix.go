package api

// The unix socket (docs/api.md#who-may-call, docs/trust.md) is the trusted transport: the CLI's, and the
// dashboard's through "ssh -L 7070:/path/tend.sock host" (no login there).
// Trust rests on who can connect, checked twice:
//
//   - the socket is bound inside the state directory, which is 0700, so no
//     other user reaches it, not even between bind and chmod;
//   - every accepted connection's peer (SO_PEERCRED) must be uid 0 or the
//     daemon's effective uid; any other is answered 403 and closed.
//
// A browser at the far end of such a tunnel could also be driven by any web
// page it has open, so localCheck refuses what only such a page sends: a
// Host that is some other DNS name (DNS rebinding), and a request that
// changes something from another Origin.

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ServeUnix listens on the unix socket at path and serves until Close. A
// stale socket left by a daemon that died is removed first (the caller holds
// the state dir's lock, so no live daemon owns it); any other kind of file
// at path is an error. The socket is made mode 0600, and only uid 0 and the
// daemon's own uid are served.
func (s *Server) ServeUnix(path string) error {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return fmt.Errorf("api: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("api: removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	// The socket is born with the umask's mode; the 0700 state dir keeps
	// others out meanwhile, and SO_PEERCRED below whatever the modes.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("api: %w", err)
	}
	return s.ServeUnixListener(l)
}

// ServeUnixListener serves on l, the unix socket ServeUnix made (made by
// this process before it re-executed itself: tend upgrade), until Close.
func (s *Server) ServeUnixListener(l net.Listener) error {
	return s.Serve(&peerListener{Listener: s.gated(l, "api.unix"), uid: uint32(os.Geteuid())})
}

// peerListener accepts only connections from uid 0 or uid.
type peerListener struct {
	net.Listener
	uid uint32
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && (uid == 0 || uid == l.uid) {
			return c, nil
		}
		msg := fmt.Sprintf("uid %d may not use this socket: it is the daemon's (uid %d)", uid, l.uid)
		if err != nil {
			msg = "cannot tell who connected: " + err.Error()
		}
		refuse(c, msg)
	}
}

// peerUID is the uid of the process at the other end of c, as the kernel
// recorded it when it connected.
func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a unix socket: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if gerr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", gerr)
	}
	return cred.Uid, nil
}

// refuse answers 403 with msg and closes c. The answer fits the empty send
// buffer of a new connection, so the write does not wait; the deadline is
// there in case it would.
func refuse(c net.Conn, msg string) {
	body := fmt.Sprintf("{\"error\":%q}\n", msg)
	c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.Close()
}

// localCheck refuses, on a trusted transport, the requests only a web page
// in a tunnelled browser would send.
func (s *Server) localCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, errorBody{Error: fmt.Sprintf(
				"Host %q is not this machine: tend answers localhost, an IP address or \"tend\" here", r.Host)})
			return
		}
		if changes(r) && r.Header.Get("Origin") != "" && !sameOrigin(r) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "cross-origin request refused: Origin must be " + ownOrigin(r)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// localHost reports whether a Host header names no other site: empty,
// "tend" (what package client sends), localhost, or an IP address, with any
// port. A DNS rebinding attack needs a name of the attacker's.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return host == "" || host == "tend" || host == "localhost" || net.ParseIP(host) != nil
}

// changes reports whether a request may change something (not GET, HEAD or
// OPTIONS).
func changes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
