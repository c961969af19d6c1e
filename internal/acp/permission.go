package acp

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/program"
)

// ask is an open permission request: the agent's handler goroutine waits
// on answer (cap 1) for the option picked, or "" for cancelled. It is on
// the list (answerable) before its asked event goes out, so whoever saw
// the event can answer it; announced is closed once that event is out,
// and whoever takes it off the list waits for that before telling the
// answer, so answered never comes before asked.
type ask struct {
	w         program.Waiting
	answer    chan string
	announced chan struct{}
}

// requestPermission is session/request_permission: answered by policy at
// once, or put to the operator and answered when they pick, when the turn
// or the run ends (cancelled), or when the agent withdraws it.
func (c *Conn) requestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.nextAsk++
	w := program.Waiting{
		RequestID: fmt.Sprintf("%s-%d", newID()[:6], c.nextAsk),
		Title:     deref(p.ToolCall.Title),
		Since:     program.Time{Time: time.Now()},
		Options:   make([]program.PermissionOption, 0, len(p.Options)),
	}
	c.mu.Unlock()
	if p.ToolCall.Kind != nil {
		w.ToolKind = string(*p.ToolCall.Kind)
	}
	for _, o := range p.Options {
		w.Options = append(w.Options, program.PermissionOption{OptionID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	if c.opts.Permission != program.PermissionAsk {
		c.announce(w)
		want := "allow_once"
		if c.opts.Permission == program.PermissionDeny {
			want = "reject_once"
		}
		id, _ := pick(w.Options, want) // none: cancelled
		c.tell(w, id, program.ByPolicy)
		return response(id), nil
	}

	a := &ask{w: w, answer: make(chan string, 1), announced: make(chan struct{})}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.asks = append(c.asks, a)
	}
	c.mu.Unlock()
	c.announce(w)
	close(a.announced)
	if closed {
		c.tell(w, "", program.ByCancelled)
		return response(""), nil
	}
	// Whoever takes the request off the list tells its answer (Answer,
	// cancelAsks, or here when the agent withdraws it), so the answer is
	// told before anything that follows from it (the turn's end).
	select {
	case id := <-a.answer:
		return response(id), nil
	case <-ctx.Done(): // the agent withdrew it, or the connection ended
		if c.drop(a) { // announced already: this goroutine did it
			c.tell(w, "", program.ByCancelled)
			return response(""), nil
		}
		return response(<-a.answer), nil // taken off meanwhile: its answer is on its way
	}
}

// announce tells and transcribes a request.
func (c *Conn) announce(w program.Waiting) {
	c.emit(Event{Kind: EventAsked, Waiting: &w})
	names := make([]string, len(w.Options))
	for i, o := range w.Options {
		names[i] = o.OptionID + " = " + o.Name
	}
	line := oneLine(fmt.Sprintf("[permission] %s (%s) asks: %s", w.Title, w.ToolKind, strings.Join(names, ", ")))
	c.transcribe(line+"\n", true)
	if t := c.current(); t != nil {
		t.add(program.TurnUpdate{Type: program.UpdatePermission, Text: line + "\n"})
	}
}

// tell tells and transcribes an answer.
func (c *Conn) tell(w program.Waiting, id, by string) {
	c.emit(Event{Kind: EventAnswered, RequestID: w.RequestID, OptionID: id, By: by})
	what := "cancelled"
	if id != "" {
		what = id
	}
	line := oneLine(fmt.Sprintf("[permission] %s: %s (by %s)", w.Title, what, by))
	if by == program.ByCancelled {
		line = oneLine(fmt.Sprintf("[permission] %s: cancelled", w.Title)) // not "(by cancelled)"
	}
	c.transcribe(line+"\n", true)
	if t := c.current(); t != nil {
		t.add(program.TurnUpdate{Type: program.UpdatePermission, Text: line + "\n"})
	}
}

// response is the answer to session/request_permission: the option picked,
// or cancelled for "".
func response(id string) sdk.RequestPermissionResponse {
	if id == "" {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(id))}
}

// pick is the first option of kind want, or of its "always" form when the
// agent offers no "once".
func pick(opts []program.PermissionOption, want string) (string, bool) {
	for _, k := range []string{want, strings.Replace(want, "_once", "_always", 1)} {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID, true
			}
		}
	}
	return "", false
}

// Answer answers the open request requestID (the oldest when "") with
// optionID; cancel answers it cancelled. An unknown request is
// ErrNothingOpen, an unknown option ErrUnknownOption, and the request
// stays open.
func (c *Conn) Answer(requestID, optionID string, cancel bool) (program.Waiting, error) {
	a, err := c.take(requestID, optionID, cancel)
	if err != nil {
		return program.Waiting{}, err
	}
	if cancel {
		optionID = ""
	}
	by := program.ByOperator
	if optionID == "" {
		by = program.ByCancelled
	}
	<-a.announced
	c.tell(a.w, optionID, by)
	a.answer <- optionID
	return a.w, nil
}

// take takes the open request requestID (the oldest when "") off the list
// when optionID is one of its options (or cancel).
func (c *Conn) take(requestID, optionID string, cancel bool) (*ask, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.asks {
		if requestID != "" && a.w.RequestID != requestID {
			continue
		}
		if !cancel {
			found := false
			for _, o := range a.w.Options {
				found = found || o.OptionID == optionID
			}
			if !found {
				return nil, fmt.Errorf("%w %q: %s offers %s", ErrUnknownOption, optionID, a.w.RequestID, optionList(a.w.Options))
			}
		}
		c.asks = append(c.asks[:i:i], c.asks[i+1:]...)
		return a, nil
	}
	if requestID != "" && len(c.asks) > 0 {
		return nil, fmt.Errorf("%w with id %q (the open one is %s)", ErrNothingOpen, requestID, c.asks[0].w.RequestID)
	}
	return nil, ErrNothingOpen
}

// Approve picks the first allow_once option (or allow_always) of the open
// request; Deny the first reject_once (or reject_always). optionID, when
// set, is picked instead.
func (c *Conn) Approve(requestID, optionID string) (program.Waiting, string, error) {
	return c.choose(requestID, optionID, "allow_once")
}

// Deny picks the first reject option of the open request.
func (c *Conn) Deny(requestID string) (program.Waiting, string, error) {
	return c.choose(requestID, "", "reject_once")
}

func (c *Conn) choose(requestID, optionID, kind string) (program.Waiting, string, error) {
	if optionID == "" {
		c.mu.Lock()
		var w *program.Waiting
		for _, a := range c.asks {
			if requestID == "" || a.w.RequestID == requestID {
				w = &a.w
				break
			}
		}
		c.mu.Unlock()
		if w == nil {
			_, err := c.Answer(requestID, "", false)
			return program.Waiting{}, "", err
		}
		id, ok := pick(w.Options, kind)
		if !ok {
			return *w, "", fmt.Errorf("%w of kind %s: %s offers %s", ErrUnknownOption, kind, w.RequestID, optionList(w.Options))
		}
		optionID = id
	}
	w, err := c.Answer(requestID, optionID, false)
	return w, optionID, err
}

func optionList(opts []program.PermissionOption) string {
	s := make([]string, len(opts))
	for i, o := range opts {
		s[i] = o.OptionID + " (" + o.Kind + ")"
	}
	return strings.Join(s, ", ")
}

// drop takes a request the agent withdrew off the list; false if it was
// taken off already (answered meanwhile).
func (c *Conn) drop(a *ask) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.asks {
		if b == a {
			c.asks = append(c.asks[:i:i], c.asks[i+1:]...)
			return true
		}
	}
	return false
}

// cancelAsks answers every open request cancelled.
func (c *Conn) cancelAsks() {
	c.mu.Lock()
	asks := c.asks
	c.asks = nil
	c.mu.Unlock()
	for _, a := range asks {
		<-a.announced
		c.tell(a.w, "", program.ByCancelled)
		a.answer <- ""
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
