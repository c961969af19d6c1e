package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/tend-sh/tend/internal/program"
)

// Sessions: labels, selection by label, and programs started on demand
// (tend run).

// ListQuery narrows a listing (GET /v1/status).
type ListQuery struct {
	AgentsOnly bool
	Labels     program.LabelSelector // only the instances whose program has every one
	ShowLabels bool                  // the table view's LABELS column
}

func (q ListQuery) values() url.Values {
	v := url.Values{}
	if q.AgentsOnly {
		v.Set("agents", "1")
	}
	if len(q.Labels) > 0 {
		v["label"] = q.Labels.Strings()
	}
	if q.ShowLabels {
		v.Set("show_labels", "1")
	}
	return v
}

// TableOf returns the ps table of what q selects as the daemon renders
// it, no line wider than width.
func (c *Client) TableOf(q ListQuery, width int) ([]byte, error) {
	v := q.values()
	v.Set("view", "table")
	v.Set("width", strconv.Itoa(width))
	return c.raw("/v1/status", v)
}

// ListJSONOf returns the listing of what q selects, undecoded.
func (c *Client) ListJSONOf(q ListQuery) ([]byte, error) { return c.raw("/v1/status", q.values()) }

// Select returns the statuses of what sel names whose program labels
// match (every one of them, for an empty selector): a list, maybe empty,
// also for one instance id.
func (c *Client) Select(ctx context.Context, sel string, labels program.LabelSelector) ([]program.Status, error) {
	if len(labels) == 0 {
		return c.Statuses(sel)
	}
	var out []program.Status
	return out, c.call(ctx, "GET", "/v1/status/"+url.PathEscape(sel), url.Values{"label": labels.Strings()}, nil, &out)
}

// SelectJSON is Select's answer undecoded (an object for one instance id
// without labels, else an array).
func (c *Client) SelectJSON(sel string, labels program.LabelSelector) ([]byte, error) {
	var v url.Values
	if len(labels) > 0 {
		v = url.Values{"label": labels.Strings()}
	}
	return c.raw("/v1/status/"+url.PathEscape(sel), v)
}

// AddProgram adds a program and returns its name (the daemon names one
// whose body has no "name": run-XXXXXXXX) and its instances' ids.
func (c *Client) AddProgram(ctx context.Context, body map[string]any) (program.Added, error) {
	var out program.Added
	return out, c.call(ctx, "POST", "/v1/programs", nil, body, &out)
}

// RemoveMatching removes every program with these labels (name ""), or
// program name if it has them, and returns the names removed.
func (c *Client) RemoveMatching(ctx context.Context, name string, labels program.LabelSelector, opts program.RemoveOptions) ([]string, error) {
	path := "/v1/programs"
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	var out struct {
		Removed []string `json:"removed"`
	}
	q := removeQuery(opts)
	q["label"] = labels.Strings()
	return out.Removed, c.call(ctx, "DELETE", path, q, nil, &out)
}

// removeQuery is DELETE /v1/programs's query for opts.
func removeQuery(opts program.RemoveOptions) url.Values {
	q := url.Values{}
	if opts.KeepLogs {
		q.Set("keep_logs", "1")
	}
	return q
}

// Signal sends sig ("INT", "TERM", …) to the process group of each running
// instance sel names; it returns their ids.
func (c *Client) Signal(ctx context.Context, sel, sig string) ([]string, error) {
	var out struct {
		IDs []string `json:"ids"`
	}
	return out.IDs, c.call(ctx, "POST", "/v1/programs/"+url.PathEscape(sel)+"/signal", nil, map[string]string{"signal": sig}, &out)
}

// OutputLine is one line of a run's output, as an attached client gets it.
type OutputLine struct {
	ID      string `json:"id"`
	Stream  string `json:"stream"` // stdout, stderr, or tend (a note of tend's own)
	Line    string `json:"line"`
	Partial bool   `json:"partial,omitempty"` // the line did not end with a newline
}

// ErrDetached is returned by Attach when the answer ends before the run
// does: the daemon stopped, or the instance was removed first.
var ErrDetached = errors.New("the run's end was not seen")

// maxAttachLine bounds one line of an attached answer: a record's line is
// at most 64 KiB, escaped as JSON at most six times that.
const maxAttachLine = 1 << 20

// Attach adds a program and follows its first run (POST
// /v1/programs?attach=1): added is called once the daemon has added it,
// out with each line the run writes, and the run's end is returned. When
// ctx ends the client goes, and the program goes on. An answer that ends
// without the run's end wraps ErrDetached.
func (c *Client) Attach(ctx context.Context, body map[string]any, added func(program.Added), out func(OutputLine)) (*program.RunEnd, error) {
	return c.attach(ctx, body, url.Values{"attach": {"1"}}, added, out)
}

// AttachRaw is Attach with a terminal's output (stream tty) as the bytes
// the program wrote: each line's Line, and a newline after it unless
// Partial.
func (c *Client) AttachRaw(ctx context.Context, body map[string]any, added func(program.Added), out func(OutputLine)) (*program.RunEnd, error) {
	return c.attach(ctx, body, url.Values{"attach": {"1"}, "raw": {"1"}}, added, out)
}

func (c *Client) attach(ctx context.Context, body map[string]any, q url.Values, added func(program.Added), out func(OutputLine)) (*program.RunEnd, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, "POST", "/v1/programs", q, b)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	sc := bufio.NewScanner(resp.body)
	sc.Buffer(make([]byte, 64<<10), maxAttachLine)
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			first = false
			var a program.Added
			if err := json.Unmarshal(line, &a); err != nil {
				return nil, fmt.Errorf("reading the attached answer: %w", err)
			}
			if added != nil {
				added(a)
			}
			continue
		}
		var l struct {
			OutputLine
			Exit  *program.RunEnd `json:"exit"`
			Error string          `json:"error"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("reading the attached answer: %w", err)
		}
		switch {
		case l.Exit != nil:
			return l.Exit, nil
		case l.Error != "":
			return nil, fmt.Errorf("%w: %s", ErrDetached, l.Error)
		case out != nil:
			out(l.OutputLine)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: the daemon closed the answer", ErrDetached)
}
