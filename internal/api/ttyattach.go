package api

// GET /v1/attach/{id} (docs/api.md#attach): a WebSocket to a tty
// instance's terminal, as xterm.js's attach addon speaks it.
//
//   - Server to client, binary: the terminal's bytes, first a redraw of the
//     screen, then what the program writes; between runs tend's one-line
//     notice and the next run's screen.
//   - Client to server, binary: keystrokes, typed into the run's terminal
//     (ignored from a ?read_only=1 client).
//   - Client to server, text: {"cols": C, "rows": R} resizes the terminal
//     (0x0 leaves it as it is; ignored from a read-only client).
//   - Server to client, text: {"error": "..."} when input or a resize could
//     not be applied (no run in place, a size out of range); the
//     connection stays open.
//   - The server closes the connection when the instance has ended for good
//     with status 1000 and the reason "done" or "error" (its lifecycle), so
//     a client can exit 0 or 1; with 1001 when the daemon shuts down.
//
// Errors before the upgrade (unknown id 404, not a terminal or not running
// 409, a browser page of another origin 403) are JSON answers, as on every
// route.
//
// A dashboard page cannot put its secret in a WebSocket's headers, so over
// TCP with the session cookie alone (access.go) the upgrade comes first and
// the client's first message must be the text {"page": SECRET}, within
// pageProofTimeout (docs/trust.md#dashboard-sessions). Only then is the id
// looked up: the cookie alone learns nothing, not even whether an id
// exists. A wrong or missing proof closes with 4401; the errors that come
// before the upgrade otherwise close with 4000 + their status (4404,
// 4409), the reason their message. The connection's cost ends with it: a client that goes away, even
// in the middle of a write, ends its reader, its writer and its Attach.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/program"
)

const (
	// maxAttachMessage bounds one message from a client: keystrokes (a
	// paste comes in pieces) or a resize.
	maxAttachMessage = program.MaxInput
	// attachWriteTimeout drops a client that takes nothing of one message
	// for this long. (It never slows the run: an Attach that falls behind
	// is sent a fresh screen instead.) With the attach's bounded queue it
	// bounds what a client that never reads costs (docs/trust.md#floods).
	attachWriteTimeout = 30 * time.Second
	// pongTimeout drops a client that does not answer a ping: a peer that
	// vanished without closing holds nothing for long.
	pongTimeout = 30 * time.Second
)

func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Terminals == nil {
		return errNoTerminals
	}
	if !isWebSocket(r) {
		w.Header().Set("Upgrade", "websocket")
		return &httpError{http.StatusUpgradeRequired, "GET /v1/attach/{id} is a WebSocket (docs/api.md#attach): send Upgrade: websocket"}
	}
	// A browser page may open a WebSocket to any site, with that site's
	// cookies: only the dashboard's own origin may attach. (A client that
	// is not a browser sends no Origin; it has the token or the socket.)
	if r.Header.Get("Origin") != "" && !sameOrigin(r) {
		return &httpError{http.StatusForbidden, "cross-origin WebSocket refused: Origin must be " + ownOrigin(r)}
	}
	readOnly, err := boolParam(r, "read_only")
	if err != nil {
		return err
	}
	if cred, _ := overTCP(r); cred == byCookie {
		s.attachPage(w, r, readOnly)
		return nil
	}
	id, err := s.oneInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	att, err := s.opts.Terminals.Attach(id, readOnly)
	if err != nil {
		return err
	}
	c, err := websocket.Accept(w, r, nil) // checks the Origin again, by host
	if err != nil {
		att.Close() // Accept has answered
		return nil
	}
	s.serveAttach(c, att, readOnly)
	return nil
}

// Proof of the page on an attach by cookie.
const (
	// pageProofTimeout bounds the wait for the first message.
	pageProofTimeout = 10 * time.Second
	// maxPageMessage bounds that message: {"page": "..."} with a 43-byte
	// secret.
	maxPageMessage = 1 << 10
	// closeUnauthorized closes an attach whose first message did not prove
	// the page: 4000 + 401, in the range RFC 6455 leaves to applications.
	closeUnauthorized = websocket.StatusCode(4000 + http.StatusUnauthorized)
)

// pageMessage is the first message of an attach by cookie.
type pageMessage struct {
	Page string `json:"page"`
}

// attachPage serves an attach by cookie alone: upgrade, then the page's
// proof, then the attach.
func (s *Server) attachPage(w http.ResponseWriter, r *http.Request, readOnly bool) {
	c, err := websocket.Accept(w, r, nil) // checks the Origin again, by host
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(maxPageMessage)
	ctx, cancel := context.WithTimeout(context.Background(), pageProofTimeout)
	typ, p, err := c.Read(ctx) // a read that times out closes the connection
	cancel()
	if err != nil {
		c.CloseNow()
		return
	}
	var m pageMessage
	if typ != websocket.MessageText || json.Unmarshal(p, &m) != nil || s.login.pageOf(sessionCookies(r), m.Page) == "" {
		c.Close(closeUnauthorized, `not logged in: the first message must be {"page": SECRET}, this page's`)
		return
	}
	id, err := s.oneInstance(r.PathValue("id"))
	var att program.Attach
	if err == nil {
		att, err = s.opts.Terminals.Attach(id, readOnly)
	}
	if err != nil {
		c.Close(websocket.StatusCode(4000+statusOf(err)), closeReason(err.Error()))
		return
	}
	s.serveAttach(c, att, readOnly)
}

// closeReason is msg cut to what a close frame holds (123 bytes), on a
// UTF-8 boundary.
func closeReason(msg string) string {
	const max = 123
	if len(msg) <= max {
		return msg
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveAttach runs one attached client until the instance ends, the client
// leaves or the server closes. Three goroutines: this one sends the
// terminal's bytes; a reader takes the client's messages (and answers its
// pings and close); a pinger notices a peer that vanished.
func (s *Server) serveAttach(c *websocket.Conn, att program.Attach, readOnly bool) {
	c.SetReadLimit(maxAttachMessage)
	// out bounds the wait for output: it ends when the client leaves
	// (the reader returns), a ping goes unanswered, or the server closes.
	out, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer stop()
		s.attachInput(c, att, readOnly)
	})
	wg.Go(func() {
		defer stop()
		s.ping(out, c)
	})
	wg.Go(func() {
		select {
		case <-s.done:
			stop()
		case <-out.Done():
		}
	})
	s.attachOutput(out, c, att)
	c.CloseNow() // after a clean close a no-op; otherwise it ends the reader
	wg.Wait()
	att.Close()
}

// attachOutput sends the terminal's bytes until the instance ends or out
// does, and closes the connection saying why.
func (s *Server) attachOutput(out context.Context, c *websocket.Conn, att program.Attach) {
	for {
		p, err := att.Next(out)
		switch {
		case errors.Is(err, io.EOF):
			end := att.End()
			if end == "" {
				end = program.LifecycleDone
			}
			c.Close(websocket.StatusNormalClosure, end)
			return
		case err != nil && isClosed(s.done):
			c.Close(websocket.StatusGoingAway, "the daemon is shutting down")
			return
		case err != nil:
			return // the client left (or did not answer a ping)
		}
		// A write that cannot finish closes the connection (coder/websocket
		// closes it when the context ends mid-write). Not a context of out:
		// out ending just as a write completes would close the connection
		// under it, before the close frame that says why.
		ctx, cancel := context.WithTimeout(context.Background(), attachWriteTimeout)
		err = c.Write(ctx, websocket.MessageBinary, p)
		cancel()
		if err != nil {
			return
		}
	}
}

// attachInput reads the client's messages until it leaves: keystrokes and
// resizes, or nothing but the close for a read-only client.
func (s *Server) attachInput(c *websocket.Conn, att program.Attach, readOnly bool) {
	for {
		// Background: a context that ends would close the connection
		// under a read; the read ends when the connection closes.
		typ, p, err := c.Read(context.Background())
		if err != nil {
			return
		}
		if readOnly {
			continue
		}
		switch typ {
		case websocket.MessageBinary:
			err = att.Write(p)
		case websocket.MessageText:
			err = resize(att, p)
		}
		if err != nil {
			sendError(c, err)
		}
	}
}

// resizeMessage is a client's text message.
type resizeMessage struct {
	Cols *int `json:"cols"`
	Rows *int `json:"rows"`
}

func resize(att program.Attach, p []byte) error {
	var m resizeMessage
	if err := json.Unmarshal(p, &m); err != nil || m.Cols == nil || m.Rows == nil || *m.Cols < 0 || *m.Rows < 0 {
		return fmt.Errorf(`a text message must be {"cols": C, "rows": R}, got %.80q`, p)
	}
	return att.Resize(*m.Cols, *m.Rows)
}

// sendError tells the client, in a text message, what could not be done.
func sendError(c *websocket.Conn, err error) {
	b, _ := json.Marshal(errorBody{Error: err.Error()})
	ctx, cancel := context.WithTimeout(context.Background(), attachWriteTimeout)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b) // a client that is gone is the reader's to notice
}

// ping pings the client every keepalive interval until ctx ends, and
// returns when one goes unanswered.
func (s *Server) ping(ctx context.Context, c *websocket.Conn) {
	t := time.NewTicker(s.keepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// As for writes, not a context of ctx; a ping waiting for its
		// pong ends when the connection closes.
		pctx, cancel := context.WithTimeout(context.Background(), pongTimeout)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
