package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Log tail limits.
const (
	defaultTail = 100
	maxTail     = 100000
	// ttyRecordsPerLine is how many records a tail reads for each line it
	// is asked for: a terminal's text line may be several records (each
	// read of the terminal is one).
	ttyRecordsPerLine = 4
)

// logRequest is what GET /v1/logs/{sel} asks for.
type logRequest struct {
	q          logfile.Query
	tail       int // the lines asked for (q.Tail reads more records of a terminal's log: see ttyText)
	follow     bool
	timestamps bool
	json       bool
	raw        bool // a terminal's log as the bytes the program wrote
}

// parseLogRequest reads ?tail=N&follow=1&since=D&timestamps=1&stderr=1&raw=1
// and the Accept header.
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
	lr.tail = lr.q.Tail
	if lr.q.Stderr, err = boolParam(r, "stderr"); err != nil {
		return lr, err
	}
	if lr.raw, err = boolParam(r, "raw"); err != nil {
		return lr, err
	}
	lr.q.Raw = lr.raw

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
// end with a newline). A terminal's log (stream tty) is shown as text,
// without control sequences, one line per line; with raw=1 as the bytes
// the program wrote.
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
	var resumed *logfile.Cursor
	if mark := r.URL.Query().Get("resume"); mark != "" {
		if !lr.follow {
			return badRequest("resume: only with follow=1")
		}
		if resumed, err = logfile.Resume(srcs, mark, lr.q.Stderr, lr.raw); err != nil {
			return badRequest("resume: " + err.Error())
		}
	}
	if lr.follow {
		// Where the follow stopped, if an upgrade in place ended it: the
		// client resumes from there on the new daemon (resume=MARK).
		w.Header().Set("Trailer", LogMarkTrailer)
	}
	if lr.json {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{bw: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), lr: lr, prefix: len(srcs) > 1}
	if lr.tail > 0 && !lr.raw && slices.ContainsFunc(srcs, func(s logfile.Source) bool { return s.TTY }) {
		// A terminal's text line may be several records (each read of the
		// terminal is one): read more of them, and keep the last lines.
		lw.keep = true
		lr.q.Tail = min(lr.tail*ttyRecordsPerLine, maxTail)
	}
	if resumed != nil {
		defer resumed.Close()
		return s.followLogs(w, r, lw, resumed)
	}
	cur, err := logfile.Read(srcs, lr.q, lw.line)
	if err == nil {
		if !lr.follow {
			err = lw.endText() // a prompt waiting for input is the last line
		}
		if err == nil {
			err = lw.writeKept()
		}
	}
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
	return s.followLogs(w, r, lw, cur)
}

// LogMarkTrailer is the trailer of a followed log's answer that an upgrade
// in place ended: where it stopped (logfile's mark), for resume=.
const LogMarkTrailer = "Tend-Log-Mark"

// followLogs sends every new line until the client or the server goes
// away: woken by the daemon's writers, and polling for logs that are
// written elsewhere. An upgrade in place ends it with the mark to resume
// from in the trailer.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, lw *lineWriter, cur *logfile.Cursor) error {
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
			// Paused for an upgrade: the client resumes from the new
			// daemon. A terminal's unfinished line is sent as it is.
			if lw.endText() == nil && lw.flush() == nil {
				w.Header().Set(LogMarkTrailer, cur.Mark())
			}
			return nil
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
	text   map[string]*ttyText // each instance's terminal text, as its records come
	keep   bool                // the tail: lines are kept (the last lr.tail of them) until writeKept
	kept   []logfile.Entry     // a ring of the last lines, when keep
	next   int                 // where the ring's next line goes
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

// line takes an entry as Read and the cursor give it: a terminal's record
// is turned into the text lines it completes, unless raw.
func (lw *lineWriter) line(e *logfile.Entry) error {
	if e.Stream != logfile.TTY || lw.lr.raw {
		return lw.out(e)
	}
	tt := lw.text[e.ID]
	if tt == nil {
		if lw.text == nil {
			lw.text = map[string]*ttyText{}
		}
		tt = &ttyText{l: vt.NewTextLines(logfile.DefaultLineMax)}
		lw.text[e.ID] = tt
	}
	tt.last = e.TS
	var err error
	emit := func(line []byte) {
		if err == nil {
			t := *e
			t.Line, t.Partial = line, false
			err = lw.out(&t)
		}
	}
	tt.l.Write(e.Line, emit)
	if !e.Partial {
		tt.l.Write([]byte{'\n'}, emit)
	}
	return err
}

// ttyText is one instance's terminal records turned into text lines.
type ttyText struct {
	l    *vt.TextLines
	last time.Time // of the last record
}

// endText ends each terminal's unfinished line (a prompt) as a partial one.
func (lw *lineWriter) endText() error {
	var err error
	for _, id := range slices.Sorted(maps.Keys(lw.text)) {
		tt := lw.text[id]
		tt.l.Flush(func(line []byte) {
			if err == nil {
				err = lw.out(&logfile.Entry{ID: id, Record: logfile.Record{TS: tt.last, Stream: logfile.TTY, Partial: true, Line: line}})
			}
		})
	}
	return err
}

// out writes a line, or keeps it for writeKept during the tail.
func (lw *lineWriter) out(e *logfile.Entry) error {
	if !lw.keep {
		return lw.write1(e)
	}
	c := *e
	c.Line = bytes.Clone(e.Line)
	if len(lw.kept) < lw.lr.tail {
		lw.kept = append(lw.kept, c)
	} else {
		lw.kept[lw.next] = c
	}
	lw.next = (lw.next + 1) % lw.lr.tail
	return nil
}

// writeKept writes the kept lines, oldest first, and ends keeping.
func (lw *lineWriter) writeKept() error {
	if !lw.keep {
		return nil
	}
	lw.keep = false
	start := 0
	if len(lw.kept) == lw.lr.tail {
		start = lw.next
	}
	for i := range lw.kept {
		if err := lw.write1(&lw.kept[(start+i)%len(lw.kept)]); err != nil {
			return err
		}
	}
	lw.kept = nil
	return nil
}

// write1 writes one line in the response's form.
func (lw *lineWriter) write1(e *logfile.Entry) error {
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
	b = append(b, e.Line...)
	if !lw.lr.raw || e.Stream != logfile.TTY || !e.Partial {
		b = append(b, '\n') // raw: a terminal's newline only where the program wrote one
	}
	lw.buf = b
	_, err := lw.bw.Write(b)
	return err
}
