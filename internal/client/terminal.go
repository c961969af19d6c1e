package client

import (
	"context"
	"errors"
	"net"
	"net/url"

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

// Terminal is a connection to a tty instance's terminal: the WebSocket
// of GET /v1/attach/{id}, which package ws makes (apart, so that what
// links this package need not link net/http: docs/cli.md#two-files).
// Read must be called in a loop for as long as the connection is open;
// Write and Resize may be called from another goroutine.
type Terminal interface {
	// Read returns the next bytes for the caller's terminal; its error is
	// a *TerminalEnded once the instance has ended for good, ErrDaemonGone
	// when the daemon shuts down.
	Read(ctx context.Context) ([]byte, error)
	// Write types p into the terminal.
	Write(ctx context.Context, p []byte) error
	// Resize asks for the terminal to be cols x rows.
	Resize(ctx context.Context, cols, rows int) error
	// Close detaches: the run goes on.
	Close() error
}

// TerminalEnded is the error of an attach's read once the instance has
// ended for good; Lifecycle is "done" or "error".
type TerminalEnded struct{ Lifecycle string }

func (e *TerminalEnded) Error() string { return "the instance ended (" + e.Lifecycle + ")" }

// ErrDaemonGone is the error of an attach's read when the daemon closed
// the connection as it shut down.
var ErrDaemonGone = errors.New("the daemon is shutting down")

// Dial connects to the daemon's socket as every request does (refusing
// one served by another user), for a connection that is not a plain
// request: the WebSocket of an attach (package ws).
func (c *Client) Dial(ctx context.Context) (net.Conn, error) { return c.dial(ctx) }
