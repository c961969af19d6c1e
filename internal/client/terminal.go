package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/program"
)

// Screen returns a tty instance's screen (GET /v1/screen/{id}); with ansi
// its rows with colours too. A bare name of one instance is that instance.
func (c *Client) Screen(id string, ansi bool) (program.Screen, error) {
	var out program.Screen
	return out, c.call(context.Background(), "GET", "/v1/screen/"+url.PathEscape(id), screenQuery(ansi), nil, &out)
}

// ScreenJSON returns Screen's answer undecoded.
func (c *Client) ScreenJSON(id string, ansi bool) ([]byte, error) {
	return c.raw("/v1/screen/"+url.PathEscape(id), screenQuery(ansi))
}

func screenQuery(ansi bool) url.Values {
	if ansi {
		return url.Values{"ansi": {"1"}}
	}
	return nil
}

// Input types in into the terminal of every running tty instance sel names
// and returns their ids (POST /v1/programs/{id}/input).
func (c *Client) Input(sel string, in program.Input) ([]string, error) {
	var out struct {
		IDs []string `json:"ids"`
	}
	return out.IDs, c.call(context.Background(), "POST", "/v1/programs/"+url.PathEscape(sel)+"/input", nil, in, &out)
}

// Terminal is a client's connection to a tty instance's terminal
// (GET /v1/attach/{id}, a WebSocket). Read must be called in a loop for as
// long as the connection is open: it also answers the daemon's pings.
// Write and Resize may be called from another goroutine than Read.
type Terminal struct {
	ws *websocket.Conn
}

// TerminalEnded is Read's error once the instance has ended for good;
// Lifecycle is "done" or "error".
type TerminalEnded struct{ Lifecycle string }

func (e *TerminalEnded) Error() string { return "the instance ended (" + e.Lifecycle + ")" }

// ErrDaemonGone is Read's error when the daemon closed the connection as
// it shut down.
var ErrDaemonGone = errors.New("the daemon is shutting down")

// AttachTerminal connects to the terminal of instance id (a bare name of
// one instance will do); with readOnly it only watches. ctx bounds the
// connecting, not the connection. A refusal (unknown id, no tty, no run)
// is an *APIError, as for every call.
func (c *Client) AttachTerminal(ctx context.Context, id string, readOnly bool) (*Terminal, error) {
	u := "ws://tend/v1/attach/" + url.PathEscape(id)
	if readOnly {
		u += "?read_only=1"
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dial(ctx)
		},
		DisableKeepAlives: true,
	}}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readAPIError(resp)
		}
		if errors.Is(err, ErrNoDaemon) || ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), unwrapDial(err))
		}
		return nil, fmt.Errorf("attaching to %s: %w", id, err)
	}
	// Terminal output comes in bursts: a redraw of a large screen is tens
	// of kilobytes in one message.
	ws.SetReadLimit(16 << 20)
	return &Terminal{ws: ws}, nil
}

// unwrapDial returns the *dialError inside err, if any, for its message.
func unwrapDial(err error) error {
	var de *dialError
	if errors.As(err, &de) {
		return de
	}
	return err
}

// Read returns the next bytes for the caller's terminal. It returns *TerminalEnded
// once the instance has ended for good, ErrDaemonGone when the daemon
// shuts down, and another error when the connection broke. The daemon's
// notes ({"error": ...} text messages, for a resize or keystrokes it could
// not apply) are skipped: a terminal in raw mode has nowhere to show them.
func (a *Terminal) Read(ctx context.Context) ([]byte, error) {
	for {
		typ, p, err := a.ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure && ce.Reason != "":
				return nil, &TerminalEnded{Lifecycle: ce.Reason}
			case errors.As(err, &ce) && ce.Code == websocket.StatusGoingAway:
				return nil, ErrDaemonGone
			}
			return nil, err
		}
		if typ == websocket.MessageBinary {
			return p, nil
		}
	}
}

// Write types p into the terminal.
func (a *Terminal) Write(ctx context.Context, p []byte) error {
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
func (a *Terminal) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(map[string]int{"cols": cols, "rows": rows})
	return a.ws.Write(ctx, websocket.MessageText, b)
}

// Close detaches: the run goes on. It says goodbye to the daemon when it
// can, and closes the connection in any case.
func (a *Terminal) Close() error {
	return a.ws.Close(websocket.StatusNormalClosure, "detached")
}
