package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// dialError is a failure to connect to the socket.
type dialError struct {
	path string
	err  error
}

func (e *dialError) Error() string {
	msg := e.err.Error()
	var se *os.SyscallError
	if errors.As(e.err, &se) {
		msg = se.Error() // "connect: no such file or directory", without the path twice
	}
	return fmt.Sprintf("%s at %s (%s)", ErrNoDaemon, e.path, msg)
}

func (e *dialError) Unwrap() []error { return []error{ErrNoDaemon, e.err} }

// ErrUntrustedDaemon is wrapped, with ErrNoDaemon, by the refusal of a
// socket served by a process of a user other than root and the caller's
// own: whoever serves it would see every command and could answer
// anything (docs/trust.md#sockets).
var ErrUntrustedDaemon = errors.New("served by another user")

// dial connects to the daemon's socket, if root or the caller's own user
// serves it (SO_PEERCRED: the kernel's record of who listens). A failure
// is a *dialError.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.via)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &dialError{c.socket, err}
	}
	if err := trusted(conn); err != nil {
		conn.Close()
		return nil, &dialError{c.socket, err}
	}
	return conn, nil
}

// trusted refuses a connection whose peer is neither root nor this
// process's effective uid.
func trusted(conn net.Conn) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix socket: %T", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if gerr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", gerr)
	}
	if euid := uint32(os.Geteuid()); cred.Uid != 0 && cred.Uid != euid {
		return fmt.Errorf("%w: pid %d of uid %d, neither root nor you (uid %d); refused", ErrUntrustedDaemon, cred.Pid, cred.Uid, euid)
	}
	return nil
}

// call sends a request with an optional JSON body and decodes a JSON answer
// into out (if not nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, q, rd, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading %s %s answer: %w", method, path, err)
	}
	return nil
}

// do sends a request and returns a 2xx response; anything else becomes an
// *APIError, and a failure to connect the *dialError. The caller closes
// the response's body.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, h http.Header) (*http.Response, error) {
	u := "http://tend" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// roundTrip sends req on a connection of its own and reads the answer's
// head; closing the body closes the connection, and so does ctx ending.
//
// Not an http.Transport: a CLI exec makes one request, and the Transport's
// connection pool costs it more than the request (a dialing goroutine, a
// reader and a writer goroutine per connection, their hand-offs) for
// nothing, since a unix socket connects in microseconds. Streams (events,
// logs -f) are the same request with a body that ends when ctx does.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	req.Close = true // Connection: close, so the daemon ends its side too
	if err := req.Write(conn); err != nil {
		return fail(fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err))
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fail(fmt.Errorf("%s %s: reading the answer: %w", req.Method, req.URL.Path, err))
	}
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// connBody is an answer's body that owns its connection.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool // unregisters the close on ctx's end
}

// Close closes the connection first: net/http's body would otherwise read
// a stream to its end (to reuse the connection), and a stream has none.
func (b *connBody) Close() error {
	b.stop()
	err := b.conn.Close()
	b.ReadCloser.Close()
	return err
}

// readAPIError turns an error answer into an *APIError, taking the message
// from a JSON {"error": ...} body or else the body's text.
func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		msg = body.Error
	}
	return &APIError{Status: resp.StatusCode, Message: msg}
}
