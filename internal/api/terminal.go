package api

// The terminal routes (docs/api.md#terminals): GET /v1/screen/{id}, POST
// /v1/programs/{id}/input, and GET /v1/attach/{id} (attach.go). They serve
// Options.Terminals; a Server without one answers them 501.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// errNoTerminals answers the terminal routes of a Server without Terminals.
var errNoTerminals = &httpError{http.StatusNotImplemented, "this server has no terminals"}

// maxInputBody caps a POST .../input body. JSON may spell each byte of the
// text as six (\u001b), and keys come beside it: a body past this carries
// more than program.MaxInput bytes of text whatever its spelling, so it is
// refused (413) without being read to its end.
const maxInputBody = 6*program.MaxInput + 64<<10

// maxKeys bounds the keys one input may name.
const maxKeys = 4096

// screen answers GET /v1/screen/{id}: the screen of one tty instance's run
// now (or of its last run), with ?ansi=1 its colours too, with
// ?history=N up to N lines of its history above it (docs/terminal.md).
func (s *Server) screen(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Terminals == nil {
		return errNoTerminals
	}
	ansi, err := boolParam(r, "ansi")
	if err != nil {
		return err
	}
	history, asked, err := historyParam(r)
	if err != nil {
		return err
	}
	id, err := s.oneInstance(r.PathValue("id"))
	if err != nil {
		return err
	}
	scr, err := s.opts.Terminals.Screen(id, ansi, history)
	if err != nil {
		return err
	}
	if scr.Lines == nil {
		scr.Lines = []string{}
	}
	if r.URL.Query().Get("view") == "text" {
		return writeScreenText(w, scr, ansi)
	}
	if !asked {
		writeJSON(w, http.StatusOK, scr)
		return nil
	}
	// Asked for, history is there even when empty.
	out := struct {
		program.Screen
		History []string `json:"history"`
	}{scr, scr.History}
	if out.History == nil {
		out.History = []string{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// maxHistoryParam bounds ?history=N: tty_history's own bound.
const maxHistoryParam = 100000

// historyParam reads ?history=N (0 to maxHistoryParam lines).
func historyParam(r *http.Request) (n int, asked bool, err error) {
	v := r.URL.Query().Get("history")
	if v == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 || n > maxHistoryParam {
		return 0, false, badRequest(fmt.Sprintf("history=%q: want a number of lines from 0 to %d", v, maxHistoryParam))
	}
	return n, true, nil
}

// input answers POST /v1/programs/{id}/input: body {"text", "keys",
// "enter"} typed into every running tty instance the selector names.
func (s *Server) input(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Terminals == nil {
		return errNoTerminals
	}
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	if r.ContentLength > maxInputBody {
		return errInputTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInputBody))
	if err != nil {
		return inputReadError(err)
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	in, err := ParseInput(body)
	if err != nil {
		return err
	}
	ids, err := s.opts.Terminals.Input(sel, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, idsBody{IDs: nonNil(ids)})
	return nil
}

var errInputTooLarge = fmt.Errorf("%w: text is capped at 64 KiB per request", program.ErrTooLarge)

// inputReadError is the error of an input body that could not be read.
func inputReadError(err error) error {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return errInputTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return &httpError{http.StatusRequestTimeout, fmt.Sprintf("request body did not arrive within %v", bodyTimeout)}
	}
	return badRequest("reading request body: " + err.Error())
}

// ParseInput reads a POST .../input body: one JSON object with "text",
// "keys" (tmux's key names, or text typed as written), "enter" and
// "literal", and nothing else. Over program.MaxInput bytes of text and
// keys wraps program.ErrTooLarge: the cap is checked here, where input
// enters; anything else wrong (not UTF-8, an unknown field, nothing to
// type) wraps program.ErrInvalid and says what.
func ParseInput(body []byte) (program.Input, error) {
	var in program.Input
	// JSON is UTF-8; encoding/json would type U+FFFD for a bad byte.
	if !utf8.Valid(body) {
		return in, fmt.Errorf("%w: request body is not valid UTF-8", program.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf(`%w: body must be {"text": "...", "keys": ["Enter", ...], "enter": true, "literal": true}: %v`, program.ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return in, fmt.Errorf("%w: body must be one JSON object, with nothing after it", program.ErrInvalid)
	}
	if in.Size() > program.MaxInput {
		return in, errInputTooLarge
	}
	if len(in.Keys) > maxKeys {
		return in, fmt.Errorf("%w: %d keys: at most %d per request", program.ErrInvalid, len(in.Keys), maxKeys)
	}
	for i, k := range in.Keys {
		if k == "" { // as tmux would type it: nothing, which is surely not what was meant
			return in, fmt.Errorf("%w: key %d is empty (keys are tmux's names: Enter, C-c, ..., or text typed as written)", program.ErrInvalid, i+1)
		}
	}
	if in.Text == "" && len(in.Keys) == 0 && !in.Enter {
		return in, fmt.Errorf(`%w: nothing to type: give "text", "keys" or "enter"`, program.ErrInvalid)
	}
	return in, nil
}

// oneInstance turns the id of a route that serves one terminal into an
// instance id: NAME:K as it is, and a bare NAME (or all) when it names
// exactly one instance, so `tend screen planner` works for a program of
// one instance.
func (s *Server) oneInstance(sel string) (string, error) {
	if _, err := selectorParam(sel); err != nil {
		return "", err
	}
	if _, _, one := program.SplitID(sel); one {
		return sel, nil
	}
	list, err := s.b.Status(sel, nil)
	if err != nil {
		return "", err
	}
	switch len(list) {
	case 0:
		return "", fmt.Errorf("%w: %s has no instances", program.ErrNotFound, sel)
	case 1:
		return list[0].ID, nil
	}
	ids := make([]string, 0, 3)
	for _, st := range list[:min(3, len(list))] {
		ids = append(ids, st.ID)
	}
	more := ""
	if len(list) > 3 {
		more = ", ..."
	}
	return "", badRequest(fmt.Sprintf("%s names %d instances: name one (%s%s)", sel, len(list), strings.Join(ids, ", "), more))
}

// writeScreenText answers ?view=text: the history and then the screen, a
// row a line, escaped as every human output is (--ansi keeping SGR
// colours; docs/trust.md), what tend screen prints. The daemon renders it,
// as it does tend ps's table, so the CLI copies bytes instead of decoding
// and escaping 2,000 lines of history itself.
func writeScreenText(w http.ResponseWriter, scr program.Screen, ansi bool) error {
	rows, escape := [2][]string{scr.History, scr.Lines}, human.Escape
	if ansi {
		rows, escape = [2][]string{scr.HistoryANSI, scr.ANSI}, human.EscapeColour
	}
	var b strings.Builder
	for _, part := range rows {
		for _, row := range part {
			b.WriteString(escape(row))
			b.WriteByte('\n')
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := io.WriteString(w, b.String())
	return err
}
