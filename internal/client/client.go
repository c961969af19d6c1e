// Package client is the Go client of tend's HTTP API over the daemon's unix
// socket, shared by the CLI and by tests. It imports only package program
// from tend, so the CLI links none of the daemon.
//
// Errors: an API error answer is an *APIError with its status code; a
// socket that cannot be dialled (missing, refused, or served by a user
// other than root and the caller: ErrUntrustedDaemon) is an error
// wrapping ErrNoDaemon.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// ErrNoDaemon is wrapped by every error that comes from not reaching the
// daemon's socket at all.
var ErrNoDaemon = errors.New("no tend daemon reachable")

// APIError is an error answer of the API.
type APIError struct {
	Status  int    // the HTTP status code
	Message string // the answer's "error" field
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the daemon answered status %d", e.Status)
}

// Client talks to one daemon. It is safe for concurrent use: it holds no
// connection between requests (see roundTrip).
type Client struct {
	socket string // the socket's path, for messages
	via    string // the path dialled: socket, or one through its held directory (NewVia)
}

// New returns a Client of the daemon listening on socketPath. It does not
// connect until a method is called.
func New(socketPath string) *Client { return &Client{socket: socketPath, via: socketPath} }

// NewHeld is New for a client that dials through the socket's directory,
// opened once now: /proc/thread-self/fd/DIR/NAME, which Linux resolves
// through the open descriptor, so that every connection reaches the same
// directory, whatever is renamed around it meanwhile (as the daemon binds
// it: docs/trust.md#sockets). release closes the directory. Where it
// cannot be opened, or /proc is not there, the client dials the path.
func NewHeld(socketPath string) (c *Client, release func()) {
	c = New(socketPath)
	dir, err := unix.Open(filepath.Dir(socketPath), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return c, func() {}
	}
	via := "/proc/thread-self/fd/" + strconv.Itoa(dir) + "/" + filepath.Base(socketPath)
	if _, err := os.Stat("/proc/thread-self/fd"); err == nil && len(via) < 108 {
		c.via = via
	}
	return c, func() { unix.Close(dir) }
}

// Socket is the path the client dials.
func (c *Client) Socket() string { return c.socket }

// ReloadResult says what a reload changed, by program name. (A copy of
// api.ReloadResult, so the CLI does not link the API server.)
type ReloadResult struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
}

// Health reports whether the daemon is serving, and its version.
func (c *Client) Health() (version string, err error) {
	var out struct {
		OK      bool   `json:"ok"`
		Version string `json:"version"`
	}
	err = c.call(context.Background(), "GET", "/healthz", nil, nil, &out)
	return out.Version, err
}

// List returns every instance's status (only agents with agentsOnly).
func (c *Client) List(agentsOnly bool) ([]program.Status, error) {
	return c.ListContext(context.Background(), agentsOnly)
}

// ListContext is List bounded by ctx.
func (c *Client) ListContext(ctx context.Context, agentsOnly bool) ([]program.Status, error) {
	q := url.Values{}
	if agentsOnly {
		q.Set("agents", "1")
	}
	var out []program.Status
	return out, c.call(ctx, "GET", "/v1/status", q, nil, &out)
}

// Table returns the ps table as the daemon renders it
// (GET /v1/status?view=table), no line wider than width.
func (c *Client) Table(agentsOnly bool, width int) ([]byte, error) {
	q := url.Values{"view": {"table"}, "width": {strconv.Itoa(width)}}
	if agentsOnly {
		q.Set("agents", "1")
	}
	return c.raw("/v1/status", q)
}

// ListJSON returns List's answer undecoded: a JSON array of status objects.
func (c *Client) ListJSON(agentsOnly bool) ([]byte, error) {
	q := url.Values{}
	if agentsOnly {
		q.Set("agents", "1")
	}
	return c.raw("/v1/status", q)
}

// raw GETs path and returns the answer's body as is.
func (c *Client) raw(path string, q url.Values) ([]byte, error) {
	resp, err := c.do(context.Background(), "GET", path, q, nil)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	b, err := io.ReadAll(resp.body)
	if err != nil {
		return nil, fmt.Errorf("reading GET %s answer: %w", path, err)
	}
	return b, nil
}

// Status returns one instance's status.
func (c *Client) Status(id string) (program.Status, error) {
	var out program.Status
	return out, c.call(context.Background(), "GET", "/v1/status/"+url.PathEscape(id), nil, nil, &out)
}

// StatusJSON returns GET /v1/status/{sel}'s answer undecoded: an object
// for "name:k", an array for a bare name or "all".
func (c *Client) StatusJSON(sel string) ([]byte, error) {
	return c.raw("/v1/status/"+url.PathEscape(sel), nil)
}

// Statuses returns the statuses of what sel names: one for "name:k", every
// instance of a bare name, every instance for "all".
func (c *Client) Statuses(sel string) ([]program.Status, error) {
	if _, _, one := program.SplitID(sel); one {
		st, err := c.Status(sel)
		if err != nil {
			return nil, err
		}
		return []program.Status{st}, nil
	}
	var out []program.Status
	return out, c.call(context.Background(), "GET", "/v1/status/"+url.PathEscape(sel), nil, nil, &out)
}

// Add adds a program. body holds the program's config keys as JSON values
// (as in TOML: "command", "instances", "restart", ...) plus "name". It
// returns the new instances' ids.
func (c *Client) Add(body map[string]any) ([]string, error) {
	var out struct {
		IDs []string `json:"ids"`
	}
	return out.IDs, c.call(context.Background(), "POST", "/v1/programs", nil, body, &out)
}

// Remove stops every instance of a program and forgets it, its logs too
// unless opts.KeepLogs.
func (c *Client) Remove(name string, opts program.RemoveOptions) error {
	return c.call(context.Background(), "DELETE", "/v1/programs/"+url.PathEscape(name), removeQuery(opts), nil, nil)
}

// Reload makes the daemon re-read its config file. A config with errors is
// an *APIError with status 400 whose Message holds the problems, one a line.
func (c *Client) Reload() (ReloadResult, error) {
	var out ReloadResult
	return out, c.call(context.Background(), "POST", "/v1/reload", nil, nil, &out)
}

// Shutdown asks the daemon to stop; it returns once the request is taken,
// not when the daemon has stopped.
func (c *Client) Shutdown() error {
	return c.call(context.Background(), "POST", "/v1/shutdown", nil, nil, nil)
}

// Upgraded is the answer of an upgrade. (A copy of api.Upgraded, so the
// CLI does not link the API server.)
type Upgraded struct {
	From           string `json:"from"`
	To             string `json:"to"`
	PID            int    `json:"pid"`
	ServingAfterMS int64  `json:"serving_after_ms"`
	Pending        bool   `json:"pending,omitempty"`
}

// Upgrade asks the daemon to re-execute its binary in place (tend
// upgrade). It returns once the new binary serves, or with the reason it
// did not (an *APIError; the old daemon then serves on).
func (c *Client) Upgrade(ctx context.Context) (Upgraded, error) {
	var out Upgraded
	return out, c.call(ctx, "POST", "/v1/upgrade", nil, nil, &out)
}

// EventFilter narrows an event query. The zero value matches every event.
type EventFilter struct {
	Kinds  []string              // event kinds; empty = all
	ID     string                // a selector: "all", a program name or "name:k"; "" = all events
	Labels program.LabelSelector // only the events of instances whose program has every one
}

func (f EventFilter) query(q url.Values) {
	if len(f.Kinds) > 0 {
		q.Set("kinds", strings.Join(f.Kinds, ","))
	}
	if f.ID != "" {
		q.Set("id", f.ID)
	}
	if len(f.Labels) > 0 {
		q["label"] = f.Labels.Strings()
	}
}

// Events returns every event with seq > since from the daemon's log.
func (c *Client) Events(since uint64) ([]program.Event, error) {
	return c.EventsMatching(since, EventFilter{})
}

// eventPage is how many events one backlog request asks for (a var for tests).
var eventPage = 10000

// EventsMatching returns the events with seq > since that pass f, oldest
// first. It reads the backlog in pages, so any number of events comes back.
func (c *Client) EventsMatching(since uint64, f EventFilter) ([]program.Event, error) {
	var all []program.Event
	for {
		q := url.Values{"since": {strconv.FormatUint(since, 10)}, "limit": {strconv.Itoa(eventPage)}}
		f.query(q)
		var page []program.Event
		if err := c.call(context.Background(), "GET", "/v1/events", q, nil, &page); err != nil {
			return all, err
		}
		all = append(all, page...)
		if len(page) < eventPage {
			return all, nil
		}
		since = page[len(page)-1].Seq
	}
}

// Doctor returns the daemon's summary of the audit log over the last since.
func (c *Client) Doctor(since time.Duration) (*program.DoctorReport, error) {
	var out program.DoctorReport
	q := url.Values{"since": {since.String()}}
	return &out, c.call(context.Background(), "GET", "/v1/doctor", q, nil, &out)
}
