package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Reconnect backoff of Follow: short, since a cut-off reader should catch
// up quickly, growing while the daemon stays away.
const (
	followBackoffMin = 100 * time.Millisecond
	followBackoffMax = 5 * time.Second
)

// maxEventLine bounds one SSE line (a status_changed event with a large
// process tree is the longest).
const maxEventLine = 16 << 20

// errCutOff ends one stream whose server said it cut this reader off.
var errCutOff = errors.New("cut off")

// Follow calls fn for every event with seq > since that matches kinds (empty
// = all) and id (a selector, "" = all), backlog first and then live, until
// ctx ends (it returns ctx.Err()) or fn returns an error (it returns that).
//
// When the stream ends — the daemon cut this reader off as slow, the
// connection dropped, the daemon restarted — Follow reconnects on its own
// after a short backoff, resuming after the last event it delivered, so fn
// sees every event once and in order. Only the first connection's failure
// is returned (ErrNoDaemon, or an *APIError for a bad query); after that it
// keeps trying until ctx ends.
func (c *Client) Follow(ctx context.Context, since uint64, kinds []string, id string, fn func(program.Event) error) error {
	return c.FollowMatching(ctx, since, EventFilter{Kinds: kinds, ID: id}, fn)
}

// FollowMatching is Follow of the events that pass f.
func (c *Client) FollowMatching(ctx context.Context, since uint64, f EventFilter, fn func(program.Event) error) error {
	last := since
	connected := false
	backoff := followBackoffMin
	for {
		n, err := c.stream(ctx, last, f, &connected, func(e program.Event) error {
			if e.Seq <= last {
				return nil // already delivered before a reconnect
			}
			last = e.Seq
			return fn(e)
		})
		var fnErr fnError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &fnErr):
			return fnErr.err
		case !connected:
			return err
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			return err // the query itself is wrong; it will not get better
		}
		if n > 0 || errors.Is(err, errCutOff) {
			backoff = followBackoffMin
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followBackoffMax)
	}
}

// fnError carries the callback's error out of stream.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// stream reads one SSE connection to its end and returns how many events it
// delivered. connected is set once the daemon has answered.
func (c *Client) stream(ctx context.Context, since uint64, f EventFilter, connected *bool, fn func(program.Event) error) (int, error) {
	q := url.Values{}
	f.query(q)
	// Last-Event-ID is how an SSE reader resumes; the API prefers it to since=.
	resp, err := c.do(ctx, "GET", "/v1/events", q, nil, header{"Accept", "text/event-stream"}, header{"Last-Event-ID", strconv.FormatUint(since, 10)})
	if err != nil {
		return 0, err
	}
	defer resp.body.Close()
	*connected = true
	return readSSE(resp.body, func(kind, data string) error {
		if kind == "cutoff" {
			return errCutOff
		}
		var e program.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		if err := fn(e); err != nil {
			return fnError{err}
		}
		return nil
	})
}

// readSSE parses a Server-Sent Events stream, calling fn with each event's
// type and data, until the stream ends or fn fails. It returns the number of
// events fn accepted.
func readSSE(r io.Reader, fn func(kind, data string) error) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var kind string
	var data []string
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				if kind == "" {
					kind = "message"
				}
				if err := fn(kind, strings.Join(data, "\n")); err != nil {
					return n, err
				}
				n++
			}
			kind, data = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			kind = value
		case "data":
			data = append(data, value)
		}
		// "id" needs no bookkeeping: each event's seq is in its data. Lines
		// starting with ':' (keepalives) and unknown fields are ignored.
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	return n, io.ErrUnexpectedEOF
}
