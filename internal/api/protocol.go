package api

// The protocol routes (docs/protocol.md#the-api): POST
// /v1/programs/{id}/prompt (?wait=1 streams the turn as Server-Sent
// Events), /cancel and /permission. They serve Options.Protocols; a
// Server without one answers them 501.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Protocols is what the protocol routes ask of the daemon. Errors: an
// unknown id wraps program.ErrNotFound, an instance without protocol
// program.ErrNotProtocol, no run program.ErrNotRunning, a full queue
// program.ErrQueueFull, and so on (statusOf maps them).
type Protocols interface {
	// Prompt queues text for the instance id; follow keeps its answer for
	// the returned Turn's Next.
	Prompt(id, text string, follow bool) (Turn, error)
	// Cancel sends session/cancel for the turn under way.
	Cancel(id string) error
	// Answer answers the open permission request.
	Answer(id string, a program.PermissionAnswer) (program.PermissionAnswer, error)
}

// Turn is a queued prompt whose answer can be followed.
type Turn interface {
	PromptID() string
	// Next waits for what came since the last call; stop is set once the
	// turn has ended.
	Next(ctx context.Context) (updates []program.TurnUpdate, stop string, err error)
}

var errNoProtocols = &httpError{http.StatusNotImplemented, "this server has no protocol agents"}

// maxPromptBody caps a prompt's body.
const maxPromptBody = 1 << 20

// prompt answers POST /v1/programs/{id}/prompt: body {"text"}; without
// wait, {"id", "prompt_id"} once queued; with ?wait=1, the turn as
// Server-Sent Events: "prompt" (its prompt_id), then "update" events
// (program.TurnUpdate), then "end" with its stop_reason.
func (s *Server) prompt(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Protocols == nil {
		return errNoProtocols
	}
	wait, err := boolParam(r, "wait")
	if err != nil {
		return err
	}
	id, err := s.oneInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	var body struct {
		Text *string `json:"text"`
	}
	if err := readJSONBody(w, r, maxPromptBody, &body); err != nil {
		return err
	}
	if body.Text == nil || strings.TrimSpace(*body.Text) == "" {
		return badRequest(`body: "text" must be a non-empty string`)
	}
	t, err := s.opts.Protocols.Prompt(id, *body.Text, wait)
	if err != nil {
		return err
	}
	if !wait {
		writeJSON(w, http.StatusOK, program.PromptAnswer{ID: id, PromptID: t.PromptID()})
		return nil
	}
	return s.turnStream(w, r, id, t)
}

// turnStream sends one turn as Server-Sent Events until it ends or the
// client leaves (the turn goes on: tend prompt cancels it itself).
func (s *Server) turnStream(w http.ResponseWriter, r *http.Request, id string, t Turn) error {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// What came since the last look goes as one write and one flush, runs
	// of text as one update: a streamed answer comes in many small
	// chunks, and a write (a chunk of the response, a syscall) and a
	// flush each would cost more than the chunk.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // into buf: no copy of each event's JSON
	add := func(event string, v any) {
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteString("\ndata: ")
		_ = enc.Encode(v) // the JSON and a newline
		buf.WriteByte('\n')
	}
	send := func() error {
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if err != nil {
			return err
		}
		return rc.Flush()
	}
	add("prompt", program.PromptAnswer{ID: id, PromptID: t.PromptID()})
	if send() != nil {
		return nil
	}
	var pace *time.Timer
	sent := 0
	for {
		if sent > paceAfter {
			// A long answer streams: gather what comes for a moment
			// rather than waking, writing and flushing for each chunk.
			if pace == nil {
				pace = time.NewTimer(paceEvery)
				defer pace.Stop()
			} else {
				pace.Reset(paceEvery)
			}
			select {
			case <-pace.C:
			case <-r.Context().Done():
				return nil
			}
		}
		ups, stop, err := t.Next(r.Context())
		if err != nil {
			return nil // the client left
		}
		for _, u := range coalesce(ups) {
			sent += len(u.Text)
			add("update", u)
		}
		if stop != "" {
			add("end", program.TurnUpdate{Type: program.UpdateEnd, PromptID: t.PromptID(), StopReason: stop})
			_ = send()
			return nil
		}
		if send() != nil {
			return nil
		}
	}
}

// A turn's stream is paced once it has sent paceAfter bytes: then it
// looks for more at most every paceEvery, so that a long answer goes out
// in writes of what came meanwhile rather than one per chunk the agent
// sent (a 10 MB answer comes in 2,560 chunks of 4 KiB from the SDK's
// agents), which cost the daemon and the client a wake, a write and an
// event each (bench/acp). The start of an answer, and a short one, go out
// as they come.
const (
	paceAfter = 64 << 10
	paceEvery = 2 * time.Millisecond
)

// coalesce joins runs of text updates into one, keeping the order.
func coalesce(ups []program.TurnUpdate) []program.TurnUpdate {
	out := make([]program.TurnUpdate, 0, len(ups))
	for i := 0; i < len(ups); {
		j := i + 1
		if ups[i].Type == program.UpdateText {
			for j < len(ups) && ups[j].Type == program.UpdateText {
				j++
			}
		}
		if j == i+1 {
			out = append(out, ups[i])
			i = j
			continue
		}
		var b strings.Builder
		n := 0
		for _, u := range ups[i:j] {
			n += len(u.Text)
		}
		b.Grow(n)
		for _, u := range ups[i:j] {
			b.WriteString(u.Text)
		}
		out = append(out, program.TurnUpdate{Type: program.UpdateText, Text: b.String()})
		i = j
	}
	return out
}

// cancelTurn answers POST /v1/programs/{id}/cancel.
func (s *Server) cancelTurn(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Protocols == nil {
		return errNoProtocols
	}
	id, err := s.oneInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.opts.Protocols.Cancel(id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
	return nil
}

// permission answers POST /v1/programs/{id}/permission: body
// {"request_id", "option_id"} or {"request_id", "cancel": true}.
func (s *Server) permission(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Protocols == nil {
		return errNoProtocols
	}
	id, err := s.oneInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	var a program.PermissionAnswer
	if err := readJSONBody(w, r, 64<<10, &a); err != nil {
		return err
	}
	if a.OptionID == "" && !a.Cancel {
		return badRequest(`body: set "option_id", or "cancel": true`)
	}
	if a.OptionID != "" && a.Cancel {
		return badRequest(`body: set "option_id" or "cancel", not both`)
	}
	got, err := s.opts.Protocols.Answer(id, a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

// readJSONBody decodes a JSON body of at most max bytes into v.
func readJSONBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body: " + err.Error())
	}
	return nil
}
