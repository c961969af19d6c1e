package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

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
// ends (then it returns nil) or the daemon goes away.
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
	var h http.Header
	if o.JSON {
		h = http.Header{"Accept": {"application/json"}}
	}
	resp, err := c.do(ctx, "GET", "/v1/logs/"+url.PathEscape(sel), q, nil, h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
