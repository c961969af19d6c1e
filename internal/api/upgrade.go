package api

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// POST /v1/upgrade re-executes the daemon in place (docs/daemon.md). The answer
// comes once the new binary serves: the daemon hands this request's
// connection over with everything else, and the new daemon writes the
// answer on it (AnswerHandedOver). A refusal (the new binary does not run,
// an upgrade already under way) is answered here, as any error. Over TLS
// the connection's session cannot be handed over: the answer 202 comes
// before the exec, and the client asks GET /healthz for the version.

// Upgraded is the answer of POST /v1/upgrade.
type Upgraded struct {
	From string `json:"from"` // the version that ran
	To   string `json:"to"`   // the version that runs now
	PID  int    `json:"pid"`  // the daemon's, the same before and after
	// ServingAfterMS is how long the new binary took from the exec to
	// serving again (the listeners taken over, the fleet taken up).
	ServingAfterMS int64 `json:"serving_after_ms"`
	// Pending (202, over TLS): the exec is about to happen.
	Pending bool `json:"pending,omitempty"`
}

// Handoff is what the daemon calls once it is about to exec: it takes the
// request's connection out of the HTTP server and returns a descriptor of
// it (close-on-exec) for the new daemon to answer on; -1 when there is
// nothing to hand over (over TLS the answer, 202 with from and to, is
// written at once).
type Handoff func(from, to string) (fd int, err error)

// StatusError is an error with the status code its answer must have.
type StatusError struct {
	Code int
	Err  error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) error {
	var conn net.Conn // hijacked by the handoff: the answer is ours to write
	handoff := func(from, to string) (int, error) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return -1, err
		}
		if _, isTLS := c.(*tls.Conn); isTLS {
			writeRaw(c, http.StatusAccepted, Upgraded{From: from, To: to, Pending: true})
			c.Close()
			return -1, nil
		}
		fd, err := dupOf(unwrapConn(c))
		if err != nil {
			c.Close()
			return -1, err
		}
		conn = c
		return fd, nil
	}
	err := s.b.Upgrade(r.Context(), handoff)
	if err == nil {
		err = errors.New("the upgrade did not happen") // the daemon returns only when it did not
	}
	if conn == nil {
		return err // not hijacked: answered as any error (or the 202 went out)
	}
	writeRaw(conn, statusOf(err), errorBody{Error: err.Error()})
	conn.Close()
	return nil
}

// unwrapConn is the connection the TCP front wraps (tcpConn), or c.
func unwrapConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tcpConn); ok {
		return tc.Conn
	}
	return c
}

// writeRaw writes a whole HTTP/1.1 answer, JSON, on a connection taken out
// of the server (or handed over), which closes after it.
func writeRaw(c net.Conn, code int, v any) {
	body, _ := json.Marshal(v)
	body = append(body, '\n')
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// AnswerHandedOver writes the answer of POST /v1/upgrade on the
// connection the daemon before the exec handed over (fd, its Handoff's),
// and closes it. It owns fd.
func AnswerHandedOver(fd int, code int, v any) error {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), "upgrade-request")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	defer c.Close()
	writeRaw(c, code, v)
	return nil
}
