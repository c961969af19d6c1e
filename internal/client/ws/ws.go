// Package ws is the client's connection to a tty instance's terminal: the
// WebSocket of GET /v1/attach/{id} (docs/api.md), over the daemon's socket
// as package client dials it. It is a package of its own because the
// WebSocket needs net/http, which the lean CLI does not link: only the
// whole tend attaches (docs/cli.md#two-files).
package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// terminal is a client.Terminal over a WebSocket. Read also answers the
// daemon's pings.
type terminal struct {
	ws *websocket.Conn
}

// Attach connects through c to the terminal of instance id (a bare name of
// one instance will do); with readOnly it only watches. ctx bounds the
// connecting, not the connection. A refusal (unknown id, no tty, no run)
// is a *client.APIError, as for every call.
func Attach(ctx context.Context, c *client.Client, id string, readOnly bool) (client.Terminal, error) {
	u := "ws://tend/v1/attach/" + url.PathEscape(id)
	if readOnly {
		u += "?read_only=1"
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.Dial(ctx)
		},
		DisableKeepAlives: true,
	}}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			return nil, client.AnswerError(resp.StatusCode, b)
		}
		if errors.Is(err, client.ErrNoDaemon) || ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), unwrapDial(err))
		}
		return nil, fmt.Errorf("attaching to %s: %w", id, err)
	}
	// Terminal output comes in bursts: a redraw of a large screen is tens
	// of kilobytes in one message.
	ws.SetReadLimit(16 << 20)
	return &terminal{ws: ws}, nil
}

// unwrapDial returns the failure to reach the daemon inside err (the
// client's own error, without the transport's wrapping), for its message.
func unwrapDial(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Is(e, client.ErrNoDaemon) {
			if _, wrapped := e.(interface{ Unwrap() error }); !wrapped {
				return e
			}
		}
	}
	return err
}

// Read returns the next bytes for the caller's terminal. It returns *client.TerminalEnded
// once the instance has ended for good, client.ErrDaemonGone when the daemon
// shuts down, and another error when the connection broke. The daemon's
// notes ({"error": ...} text messages, for a resize or keystrokes it could
// not apply) are skipped: a terminal in raw mode has nowhere to show them.
func (a *terminal) Read(ctx context.Context) ([]byte, error) {
	for {
		typ, p, err := a.ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure && ce.Reason != "":
				return nil, &client.TerminalEnded{Lifecycle: ce.Reason}
			case errors.As(err, &ce) && ce.Code == websocket.StatusGoingAway:
				return nil, client.ErrDaemonGone
			}
			return nil, err
		}
		if typ == websocket.MessageBinary {
			return p, nil
		}
	}
}

// Write types p into the terminal.
func (a *terminal) Write(ctx context.Context, p []byte) error {
	for len(p) > 0 { // the daemon takes a message of at most 64 KiB
		n := min(len(p), program.MaxInput)
		if err := a.ws.Write(ctx, websocket.MessageBinary, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize asks for the terminal to be cols x rows; 0x0 leaves it as it is.
func (a *terminal) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(map[string]int{"cols": cols, "rows": rows})
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// Close detaches: the run goes on. It says goodbye to the daemon when it
// can, and closes the connection in any case.
func (a *terminal) Close() error {
	return a.ws.Close(websocket.StatusNormalClosure, "detached")
}
