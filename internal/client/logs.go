package client

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// LogOptions select what Logs prints.
type LogOptions struct {
	Tail       int    // the last lines, over every selected instance together; < 0 = the daemon's default (100, or every line since Since)
	Follow     bool   // go on with every new line until ctx ends
	Since      string // only lines newer than this: a duration ("10m") or an RFC 3339 time; "" = any
	Timestamps bool   // each line with its time
	Stderr     bool   // only stderr lines
	JSON       bool   // JSON lines {"ts","id","stream","line"} instead of text
	Raw        bool   // a terminal's output (stream tty) as the bytes the program wrote, not as text
	// Labels keep the instances whose program has every one of them.
	Labels program.LabelSelector
}

// Logs writes the captured output of the instances sel names (NAME:K, NAME
// or all) to w: with more than one, merged in time order and each line
// prefixed "NAME:K | ". With Follow it goes on writing new lines until ctx
// ends (then it returns nil) or the daemon goes away; an upgrade in place
// of the daemon does not end it: it goes on from where it was on the new
// daemon, as Follow of events does.
func (c *Client) Logs(ctx context.Context, sel string, o LogOptions, w io.Writer) error {
	q := url.Values{}
	if o.Tail >= 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Since != "" {
		q.Set("since", o.Since)
	}
	for name, on := range map[string]bool{"follow": o.Follow, "timestamps": o.Timestamps, "stderr": o.Stderr, "raw": o.Raw} {
		if on {
			q.Set(name, "1")
		}
	}
	if len(o.Labels) > 0 {
		q["label"] = o.Labels.Strings()
	}
	var h []header
	if o.JSON {
		h = []header{{"Accept", "application/json"}}
	}
	backoff := followBackoffMin
	for {
		mark, answered, err := c.logsOnce(ctx, sel, q, h, w)
		switch {
		case ctx.Err() != nil:
			return nil
		case mark == "" && (answered || q.Get("resume") == ""):
			return err // the answer's end, or no daemon to begin with
		case mark != "":
			q.Set("resume", mark) // from where it stopped, not a tail again
			q.Del("tail")
			q.Del("since")
			backoff = followBackoffMin
			continue
		}
		// Resuming, and the new daemon did not answer yet: again, as
		// Follow does, unless it refused the request.
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followBackoffMax)
	}
}

// logMarkTrailer is the trailer in which the daemon says where a followed
// log stopped when an upgrade in place ended it.
const logMarkTrailer = "Tend-Log-Mark"

// logsOnce is one request of Logs: it copies the answer to w and returns
// the mark to resume from, if the daemon ended it for an upgrade, and
// whether the daemon answered the request (with lines, not an error).
func (c *Client) logsOnce(ctx context.Context, sel string, q url.Values, h []header, w io.Writer) (mark string, answered bool, err error) {
	resp, err := c.do(ctx, "GET", "/v1/logs/"+url.PathEscape(sel), q, nil, h...)
	if err != nil {
		return "", false, err
	}
	defer resp.body.Close()
	if _, err := io.Copy(w, resp.body); err != nil {
		return "", true, err
	}
	return resp.body.trailer.Get(logMarkTrailer), true, nil
}
