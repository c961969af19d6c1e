package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// maxBody caps a POST /v1/programs body.
const maxBody = 1 << 20

// bodyTimeout bounds how long a request may take to deliver the body it
// announces. The servers have no read timeout (it would also end the
// long-lived streams), so without this a client that sends headers and then
// stalls would hold a connection and a goroutine for good: in a handler
// reading the body, or in net/http draining it before the answer.
const bodyTimeout = 30 * time.Second

// limitBodyTime gives a request with a body bodyTimeout to send it.
func limitBodyTime(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 { // -1: chunked, length unknown
		// Not every ResponseWriter can (test recorders); nothing to do then.
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": s.opts.Version})
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) error {
	agents, err := boolParam(r, "agents")
	if err != nil {
		return err
	}
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	view, width, cols, err := viewParams(r)
	if err != nil {
		return err
	}
	list, written := s.b.List(agents, labels)
	// The list's process samples are refreshed once the answer is out (the
	// call only starts that): the next listing finds them fresh.
	defer written()
	if view == "table" {
		return writeTable(w, list, width, cols)
	}
	writeStatuses(w, http.StatusOK, list)
	return nil
}

// viewParams reads a listing's ?view= (full or table) and, for a table,
// its ?width= and columns.
func viewParams(r *http.Request) (view string, width int, cols human.TableOptions, err error) {
	switch view = r.URL.Query().Get("view"); view {
	case "", "full":
		return "full", 0, cols, nil
	case "table":
	default:
		return "", 0, cols, badRequest(fmt.Sprintf("view=%q: want full or table", view))
	}
	width, err = intParam(r, "width", 120)
	if err == nil && (width < 1 || width > maxTableWidth) {
		err = badRequest(fmt.Sprintf("width=%d: want 1 to %d", width, maxTableWidth))
	}
	if err != nil {
		return "", 0, cols, err
	}
	cols, err = columnsParam(r)
	return view, width, cols, err
}

// maxTableWidth bounds ?width= of the table view: wider than any terminal.
const maxTableWidth = 10000

func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return lookupError{err}
	}
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	list, err := s.b.Status(sel, labels)
	if err != nil {
		return lookupError{err}
	}
	// NAME:K answers the object itself; with labels, always a list (of
	// the matches, maybe none).
	if _, _, one := program.SplitID(sel); one && len(labels) == 0 {
		if len(list) == 0 {
			return lookupError{fmt.Errorf("%w: %s", program.ErrNotFound, sel)}
		}
		writeJSON(w, http.StatusOK, list[0])
		return nil
	}
	writeJSONList(w, http.StatusOK, nonNil(list))
	return nil
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	attach, err := boolParam(r, "attach")
	if err != nil {
		return err
	}
	// A body without a name gets one (run-XXXXXXXX), drawn again if it
	// is taken.
	generated := !namesItself(body)
	for attempt := 1; ; attempt++ {
		named := body
		if generated {
			named = withName(body, newRunName())
		}
		spec, err := s.b.ParseProgram(named)
		if err != nil {
			if statusOf(err) == http.StatusInternalServerError {
				err = fmt.Errorf("%w: %w", program.ErrInvalid, err)
			}
			return err
		}
		if attach {
			err = s.addAttached(w, r, spec, named)
		} else {
			var ids []string
			if ids, err = s.b.Add(spec, named); err == nil {
				writeJSON(w, http.StatusCreated, program.Added{Name: spec.Name, IDs: nonNil(ids)})
			}
		}
		if generated && errors.Is(err, program.ErrExists) && attempt < 5 {
			continue
		}
		return err
	}
}

// readBody reads a POST /v1/programs body: at most 1 MiB, in time, UTF-8.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			return nil, &httpError{http.StatusRequestEntityTooLarge, "request body is larger than 1 MiB"}
		case errors.As(err, &netErr) && netErr.Timeout():
			return nil, &httpError{http.StatusRequestTimeout, fmt.Sprintf("request body did not arrive within %v", bodyTimeout)}
		}
		return nil, badRequest("reading request body: " + err.Error())
	}
	// The body is all here: what follows may take as long as it needs.
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	// JSON is UTF-8 (RFC 8259). encoding/json would quietly turn a bad byte
	// into U+FFFD, and the daemon would then run an argv nobody sent.
	if !utf8.Valid(body) {
		return nil, badRequest("request body is not valid UTF-8")
	}
	return body, nil
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !program.NamePattern.MatchString(name) {
		return fmt.Errorf("%w: %q is not a program name", program.ErrNotFound, name)
	}
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	if len(labels) > 0 { // the program if it matches: the answer is a list
		return s.removeMatching(w, r, name, labels)
	}
	if err := s.b.Remove(r.Context(), name, removeOptions(r)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
	return nil
}

// idsBody answers add and scale.
type idsBody struct {
	IDs []string `json:"ids"`
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, s.b.Start)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, s.b.Stop)
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, s.b.Restart)
}

// act runs an operator action on the selector in the path: ?wait=1 answers
// once done (bounded by ?timeout=D, default the client's patience), ?now=1
// skips an agent's turn_grace.
func (s *Server) act(w http.ResponseWriter, r *http.Request, do func(context.Context, string, program.ActOptions) (program.ActResult, error)) error {
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	var opts program.ActOptions
	if opts.Wait, err = boolParam(r, "wait"); err != nil {
		return err
	}
	if opts.Now, err = boolParam(r, "now"); err != nil {
		return err
	}
	if opts.Labels, err = labelParam(r); err != nil {
		return err
	}
	ctx := r.Context()
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return badRequest(fmt.Sprintf("timeout=%q: want a positive Go duration such as 30s", v))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res, err := do(ctx, sel, opts)
	if err != nil {
		return err
	}
	res.IDs = nonNil(res.IDs)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// scale answers POST /v1/programs/{name}/scale with body {"instances": N}.
func (s *Server) scale(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !program.ValidName(name) {
		return fmt.Errorf("%w: %q is not a program name", program.ErrNotFound, name)
	}
	var body struct {
		Instances *int `json:"instances"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return badRequest("body must be {\"instances\": N}: " + err.Error())
	}
	if body.Instances == nil || *body.Instances < 0 || *body.Instances > program.MaxInstances {
		return badRequest(fmt.Sprintf("instances: want a number from 0 to %d", program.MaxInstances))
	}
	ids, err := s.b.Scale(r.Context(), name, *body.Instances)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, idsBody{IDs: nonNil(ids)})
	return nil
}

// ready answers GET /readyz: 200 when every instance that should run is
// running and ready, else 503; the ids not ready only to trusted callers
// (the unix socket, or TCP with the token).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	rd := s.b.Readiness()
	if !trusted(r) {
		rd.NotReady = nil
	}
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
	return nil
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) error {
	res, err := s.b.Reload()
	if err != nil {
		return err
	}
	res.Added, res.Removed = nonNil(res.Added), nonNil(res.Removed)
	res.Changed, res.Unchanged = nonNil(res.Changed), nonNil(res.Unchanged)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// shutdown answers first: Shutdown begins stopping the daemon, which closes
// this server, and the client should hear that its request was taken.
func (s *Server) shutdown(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusAccepted, map[string]bool{"ok": true})
	http.NewResponseController(w).Flush() // best effort
	s.b.Shutdown()
	return nil
}

// selectorParam checks the form of an id argument. A malformed one names
// nothing, so it is a 404 like an unknown one.
func selectorParam(id string) (string, error) {
	if _, err := program.ParseSelector(id); err != nil {
		return "", fmt.Errorf("%w: %w", program.ErrNotFound, err)
	}
	return id, nil
}

// boolParam reads an optional boolean query parameter ("1", "true", ...).
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(fmt.Sprintf("%s=%q: want 1 or 0", name, v))
	}
	return b, nil
}

// intParam reads an optional non-negative integer query parameter.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest(fmt.Sprintf("%s=%q: want a number from 0", name, v))
	}
	return n, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// doctor summarises the audit log: ?since=24h (a Go duration, default 24h).
func (s *Server) doctor(w http.ResponseWriter, r *http.Request) error {
	since := 24 * time.Hour
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return badRequest(fmt.Sprintf("since=%q: want a positive Go duration such as 24h or 90m", v))
		}
		since = d
	}
	rep, err := s.b.Doctor(since)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// removeOptions reads DELETE /v1/programs's ?keep_logs=1.
func removeOptions(r *http.Request) program.RemoveOptions {
	return program.RemoveOptions{KeepLogs: r.URL.Query().Get("keep_logs") == "1"}
}
