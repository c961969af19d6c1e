package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// Log tail limits.
const (
	defaultTail = 100
	maxTail     = 100000
)

// logRequest is what GET /v1/logs/{sel} asks for.
type logRequest struct {
	q          logfile.Query
	follow     bool
	timestamps bool
	json       bool
}

// parseLogRequest reads ?tail=N&follow=1&since=D&timestamps=1&stderr=1 and
// the Accept header.
func parseLogRequest(r *http.Request, now time.Time) (logRequest, error) {
	var lr logRequest
	since, err := sinceParam(r, now)
	if err != nil {
		return lr, err
	}
	def := defaultTail
	if !since.IsZero() {
		def = maxTail // since alone means everything since, within the cap
	}
	tail, err := intParam(r, "tail", def)
	if err != nil {
		return lr, err
	}
	lr.q = logfile.Query{Tail: min(tail, maxTail), Since: since}
	if lr.q.Stderr, err = boolParam(r, "stderr"); err != nil {
		return lr, err
	}
	if lr.follow, err = boolParam(r, "follow"); err != nil {
		return lr, err
	}
	if lr.timestamps, err = boolParam(r, "timestamps"); err != nil {
		return lr, err
	}
	lr.json = wantsJSON(r)
	return lr, nil
}

// sinceParam reads since= as a Go duration (lines newer than now minus it)
// or an RFC 3339 time; absent, the zero time.
func sinceParam(r *http.Request, now time.Time) (time.Time, error) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, badRequest(fmt.Sprintf("since=%q: want a duration such as 10m or an RFC 3339 time", v))
}

// logs answers GET /v1/logs/{sel}: the last lines of the instances sel
// names (NAME:K, NAME or all), merged in time order; with more than one
// instance each line is prefixed "NAME:K | ", as docker compose does. With
// follow it goes on with every new line of each of them until the client
// goes away. With Accept: application/json it answers JSON lines
// {"ts","id","stream","line"} (and "partial": true for a line that did not
// end with a newline).
func (s *Server) logs(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	lr, err := parseLogRequest(r, time.Now())
	if err != nil {
		return err
	}
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	srcs, err := s.b.LogSources(sel, labels)
	if err != nil {
		return err
	}
	if lr.json {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{bw: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), lr: lr, prefix: len(srcs) > 1}
	cur, err := logfile.Read(srcs, lr.q, lw.line)
	if err == nil {
		err = lw.flush()
	}
	if err != nil {
		return nil // the client went away: nothing more to say
	}
	defer cur.Close()
	if !lr.follow {
		return nil
	}
	return s.followLogs(r, lw, cur)
}

// followLogs sends every new line until the client or the server goes
// away: woken by the daemon's writers, and polling for logs that are
// written elsewhere.
func (s *Server) followLogs(r *http.Request, lw *lineWriter, cur *logfile.Cursor) error {
	wake, cut := cur.C(), s.streamsCut()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-cut:
			return nil // paused for an upgrade: the client resumes from the new daemon
		case <-wake:
		case <-tick.C:
		}
		for {
			entries, more, err := cur.Next()
			if err != nil {
				return nil
			}
			if err := lw.write(entries); err != nil {
				return nil // the client went away
			}
			if !more {
				break
			}
		}
	}
}

// lineWriter renders entries as a response's lines. Its error is a write
// error: the client is gone.
type lineWriter struct {
	bw     *bufio.Writer
	rc     *http.ResponseController
	lr     logRequest
	prefix bool // more than one instance: "NAME:K | " before each line
	buf    []byte
}

// write sends entries and flushes them to the client.
func (lw *lineWriter) write(entries []logfile.Entry) error {
	for i := range entries {
		if err := lw.line(&entries[i]); err != nil {
			return err
		}
	}
	return lw.flush()
}

// flush sends what is buffered on to the client.
func (lw *lineWriter) flush() error {
	if err := lw.bw.Flush(); err != nil {
		return err
	}
	return lw.rc.Flush()
}

// jsonLine is one line of the JSON form.
type jsonLine struct {
	TS      program.Time `json:"ts"` // null for a line stored without a time
	ID      string       `json:"id"`
	Stream  string       `json:"stream"`
	Line    string       `json:"line"`
	Partial bool         `json:"partial,omitempty"`
}

func (lw *lineWriter) line(e *logfile.Entry) error {
	if lw.lr.json {
		b, err := json.Marshal(jsonLine{TS: program.Time{Time: e.TS}, ID: e.ID, Stream: e.Stream.String(), Line: string(e.Line), Partial: e.Partial})
		if err != nil {
			return nil // cannot happen for these types
		}
		_, err = lw.bw.Write(append(b, '\n'))
		return err
	}
	b := lw.buf[:0]
	if lw.prefix {
		b = append(append(b, e.ID...), " | "...)
	}
	if lw.lr.timestamps {
		if e.TS.IsZero() {
			b = append(b, strings.Repeat(" ", 23)+"-"...)
		} else {
			b = logfile.AppendTS(b, e.TS)
		}
		b = append(b, ' ')
	}
	b = append(append(b, e.Line...), '\n')
	lw.buf = b
	_, err := lw.bw.Write(b)
	return err
}
