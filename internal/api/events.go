package api

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Sizes of a JSON backlog answer: limit= defaults to the first and is
// capped at the second, so one request cannot load a whole audit log.
const (
	defaultEventLimit = 10000
	maxEventLimit     = 100000
)

// maxKinds caps the kinds= filter. There are a dozen kinds; without a cap
// a stream would hold whatever a megabyte of query names for its lifetime.
const maxKinds = 64

// cutoffMessage is the data of the final SSE event sent to a reader the
// event log dropped for being slow.
const cutoffMessage = "slow subscriber cut off; reconnect with Last-Event-ID"

// eventQuery is what GET /v1/events asks for.
type eventQuery struct {
	since  uint64
	kinds  map[string]bool // nil = every kind
	sel    *program.Selector
	labels program.LabelSelector // events of the instances of programs with these labels
}

// match reports whether e passes the kinds= and id= filters.
func (q *eventQuery) match(e program.Event) bool {
	if q.kinds != nil && !q.kinds[e.Kind] {
		return false
	}
	if len(q.labels) > 0 && !q.labels.Matches(e.LabelSet()) {
		return false // an event of no instance (daemon, tracked_changed) has no labels: no match
	}
	switch {
	case q.sel == nil:
		return true
	case e.ID == "":
		return false
	case q.sel.All:
		return true
	case q.sel.Instance < 0:
		return e.Program == q.sel.Program
	}
	return e.ID == program.InstanceID(q.sel.Program, q.sel.Instance)
}

func parseEventQuery(r *http.Request) (*eventQuery, error) {
	q := &eventQuery{}
	since := r.URL.Query().Get("since")
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		since = v // a resuming EventSource wins over the URL it was opened with
	}
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("since=%q: want an event seq from 0", since))
		}
		q.since = n
	}
	if v := r.URL.Query().Get("kinds"); v != "" {
		q.kinds = map[string]bool{}
		for k := range strings.SplitSeq(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				q.kinds[k] = true
			}
			if len(q.kinds) > maxKinds {
				return nil, badRequest(fmt.Sprintf("kinds: more than %d kinds", maxKinds))
			}
		}
	}
	if v := r.URL.Query().Get("id"); v != "" {
		sel, err := program.ParseSelector(v)
		if err != nil {
			return nil, badRequest("id: " + err.Error())
		}
		q.sel = &sel
	}
	var err error
	if q.labels, err = labelParam(r); err != nil {
		return nil, err
	}
	return q, nil
}

// events answers GET /v1/events: the backlog as a JSON array, or a
// Server-Sent Events stream of backlog then live events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q, err := parseEventQuery(r)
	if err != nil {
		return err
	}
	if wantsJSON(r) {
		return s.eventBacklog(w, r, q)
	}
	return s.eventStream(w, r, q)
}

func wantsJSON(r *http.Request) bool {
	if r.URL.Query().Get("format") == "json" {
		return true
	}
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == "application/json" {
			return true
		}
	}
	return false
}

// eventBacklog answers with up to limit matching events after since. It
// reads the log in pages so a filter does not shorten a page: a caller that
// gets fewer than limit events has them all.
func (s *Server) eventBacklog(w http.ResponseWriter, r *http.Request, q *eventQuery) error {
	limit, err := intParam(r, "limit", defaultEventLimit)
	if err != nil {
		return err
	}
	if limit == 0 {
		return badRequest("limit=0: want a number from 1")
	}
	limit = min(limit, maxEventLimit)
	out := []program.Event{}
	for cursor := q.since; len(out) < limit; {
		page, err := s.ev.Since(cursor, limit)
		if err != nil {
			return err
		}
		before := cursor
		for _, e := range page {
			cursor = max(cursor, e.Seq)
			if q.match(e) && len(out) < limit {
				out = append(out, e)
			}
		}
		if len(page) < limit || cursor == before {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// eventStream sends Server-Sent Events: each event as "id: SEQ", "event:
// KIND", "data: JSON", flushed one by one, with a keepalive comment when
// quiet. It ends when the client leaves, the server closes or the log cuts
// this reader off, which it says with a last "cutoff" event.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request, q *eventQuery) error {
	rc := http.NewResponseController(w)
	cut := s.streamsCut()
	sub := s.ev.Subscribe(q.since)
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return nil
	}
	keepalive := time.NewTicker(s.keepalive)
	defer keepalive.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-cut:
			return nil // paused for an upgrade: the client resumes from the new daemon
		case <-keepalive.C:
			_, err = fmt.Fprint(w, ": keepalive\n\n")
		case e, ok := <-sub.C():
			// Write what else is already queued before the one flush (one
			// write(2)), so a burst costs a crowd of readers one wake-up each.
			for {
				var end bool
				if end, err = s.writeEvent(w, rc, q, e, ok, sub); end || err != nil {
					return nil
				}
				select {
				case e, ok = <-sub.C():
					continue
				default:
				}
				break
			}
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return nil // the client went away
		}
	}
}

// writeEvent writes one event the stream's filter passes; ok false is the
// end of the subscription (end is then true, after a last "cutoff" event
// if the log cut this reader off).
func (s *Server) writeEvent(w http.ResponseWriter, rc *http.ResponseController, q *eventQuery, e program.Event, ok bool, sub Subscription) (end bool, err error) {
	switch {
	case !ok && sub.CutOff():
		data, _ := json.Marshal(errorBody{Error: cutoffMessage})
		writeSSE(w, "", "cutoff", data) // the stream ends either way
		rc.Flush()
		return true, nil
	case !ok:
		return true, nil
	case !q.match(e):
		return false, nil
	}
	data := e.JSON // encoded once by the event log for every reader
	if data == nil {
		var merr error
		if data, merr = json.Marshal(e); merr != nil {
			return false, nil // a payload bug; resending it on reconnect would not help
		}
	}
	return false, writeSSE(w, strconv.FormatUint(e.Seq, 10), e.Kind, data)
}

// writeSSE writes one event. JSON has no raw newlines, so data is one line.
func writeSSE(w http.ResponseWriter, id, kind string, data []byte) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + kind + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}
