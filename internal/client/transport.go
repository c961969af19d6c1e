package client

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
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
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, err := c.do(ctx, method, path, q, b, header{"Accept", "application/json"})
	if err != nil {
		return err
	}
	defer resp.body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.body).Decode(out); err != nil {
		return fmt.Errorf("reading %s %s answer: %w", method, path, err)
	}
	return nil
}

// header is one request header line.
type header struct{ key, value string }

// response is an answer: its status, its head and its body, which owns the
// connection.
type response struct {
	status int
	header textproto.MIMEHeader
	body   *body
}

// do sends a request (with a JSON body, when body is not nil) and returns
// a 2xx answer; anything else becomes an *APIError, and a failure to
// connect the *dialError. The caller closes the answer's body.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, h ...header) (*response, error) {
	target := path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	if body != nil {
		h = append(h, header{"Content-Type", "application/json"}, header{"Content-Length", strconv.Itoa(len(body))})
	}
	resp, err := c.roundTrip(ctx, method, target, h, body)
	if err != nil {
		return nil, err
	}
	if resp.status >= 300 {
		defer resp.body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.body, 1<<20))
		return nil, AnswerError(resp.status, b)
	}
	return resp, nil
}

// roundTrip sends a request on a connection of its own and reads the
// answer's head; closing the body closes the connection, and so does ctx
// ending.
//
// HTTP/1.1 by hand, not net/http: a CLI exec makes one request on a unix
// socket, and linking net/http (with crypto/tls and x509, whose package
// initialisers run on every exec) costs each verb about half a
// millisecond before it starts, and its Transport's connection pool costs
// a request more than the request (a dialing goroutine, a reader and a
// writer per connection). What the API answers is little HTTP: a status
// line, headers, a body of Content-Length bytes or chunked (streams: events,
// logs -f, with a trailer where a followed log stopped), or up to the
// connection's end (docs/cli.md#two-files). Streams are the same request
// with a body that ends when ctx does.
func (c *Client) roundTrip(ctx context.Context, method, target string, h []header, body []byte) (*response, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// Connection: close, so the daemon ends its side too.
	req := make([]byte, 0, 256+len(body))
	req = append(req, method+" "+target+" HTTP/1.1\r\nHost: tend\r\nConnection: close\r\n"...)
	for _, l := range h {
		req = append(req, l.key+": "+l.value+"\r\n"...)
	}
	req = append(append(req, "\r\n"...), body...)
	if _, err := conn.Write(req); err != nil {
		return fail(fmt.Errorf("%s %s: %w", method, target, err))
	}
	resp, err := readResponse(bufio.NewReader(conn), method)
	if err != nil {
		return fail(fmt.Errorf("%s %s: reading the answer: %w", method, target, err))
	}
	resp.body.conn, resp.body.stop = conn, stop
	return resp, nil
}

// readResponse reads an answer's status line and headers from r and
// readies its body.
func readResponse(r *bufio.Reader, method string) (*response, error) {
	tp := textproto.NewReader(r)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || err != nil {
		return nil, fmt.Errorf("not an HTTP/1 status line: %q", line)
	}
	head, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	b := &body{r: r, left: -1}
	switch {
	case status/100 == 1 || status == 204 || status == 304 || method == "HEAD":
		b.left = 0
	case strings.EqualFold(head.Get("Transfer-Encoding"), "chunked"):
		b.chunked = true
	case head.Get("Content-Length") != "":
		n, err := strconv.ParseInt(head.Get("Content-Length"), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad Content-Length %q", head.Get("Content-Length"))
		}
		b.left = n
	}
	return &response{status: status, header: head, body: b}, nil
}

// body is an answer's body: Content-Length bytes (left), chunks (RFC 9112
// section 7.1), or everything up to the connection's end (left -1). It
// owns the connection. Only the goroutine that reads uses it; Close may
// come from another.
type body struct {
	r       *bufio.Reader
	chunked bool
	left    int64 // bytes left: of the body, or of the chunk; -1: to the end
	started bool  // chunked: a chunk has been begun (its CRLF is due)
	ended   bool
	trailer textproto.MIMEHeader // chunked: the trailer, once read to the end

	conn net.Conn
	stop func() bool // unregisters the close on ctx's end
}

func (b *body) Read(p []byte) (int, error) {
	if b.chunked {
		return b.readChunked(p)
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}

// readChunked reads from the chunk under way, beginning the next where
// one ends: its size line, or at the last (size 0) the trailer.
func (b *body) readChunked(p []byte) (int, error) {
	for b.left <= 0 {
		if b.ended {
			return 0, io.EOF
		}
		if err := b.nextChunk(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *body) nextChunk() error {
	tp := textproto.NewReader(b.r)
	if b.started { // the CRLF after the last chunk's data
		if l, err := tp.ReadLine(); err != nil || l != "" {
			return cmp.Or(err, errors.New("chunk not followed by CRLF"))
		}
	}
	b.started = true
	line, err := tp.ReadLine()
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";") // chunk extensions: none meant for us
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad chunk size line %q", line)
	}
	if n == 0 {
		b.ended = true
		b.trailer, err = tp.ReadMIMEHeader()
		return err
	}
	b.left = n
	return nil
}

// Close closes the connection: a stream has no end to read to.
func (b *body) Close() error {
	if b.conn == nil {
		return nil
	}
	b.stop()
	return b.conn.Close()
}

// AnswerError is the *APIError of an error answer with status and body,
// taking the message from a JSON {"error": ...} body or else the body's
// text.
func AnswerError(status int, b []byte) *APIError {
	var body struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		msg = body.Error
	}
	return &APIError{Status: status, Message: msg}
}
