package api

import (
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
	list := s.b.List(agents)
	if list == nil {
		list = []program.Status{}
	}
	switch view := r.URL.Query().Get("view"); view {
	case "", "full":
		writeJSON(w, http.StatusOK, list)
	case "table":
		width, err := intParam(r, "width", 120)
		if err == nil && (width < 1 || width > maxTableWidth) {
			err = badRequest(fmt.Sprintf("width=%d: want 1 to %d", width, maxTableWidth))
		}
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		return human.Table(w, list, width)
	default:
		return badRequest(fmt.Sprintf("view=%q: want full or table", view))
	}
	return nil
}

// maxTableWidth bounds ?width= of the table view: wider than any terminal.
const maxTableWidth = 10000

func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, _, ok := program.SplitID(id); !ok {
		return lookupError{fmt.Errorf("%w: %q is not an instance id (name:k)", program.ErrNotFound, id)}
	}
	st, err := s.b.Status(id)
	if err != nil {
		return lookupError{err}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			return &httpError{http.StatusRequestEntityTooLarge, "request body is larger than 1 MiB"}
		case errors.As(err, &netErr) && netErr.Timeout():
			return &httpError{http.StatusRequestTimeout, fmt.Sprintf("request body did not arrive within %v", bodyTimeout)}
		}
		return badRequest("reading request body: " + err.Error())
	}
	// The body is all here: what follows may take as long as it needs.
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	// JSON is UTF-8 (RFC 8259). encoding/json would quietly turn a bad byte
	// into U+FFFD, and the daemon would then run an argv nobody sent.
	if !utf8.Valid(body) {
		return badRequest("request body is not valid UTF-8")
	}
	spec, err := s.b.ParseProgram(body)
	if err != nil {
		if statusOf(err) == http.StatusInternalServerError {
			err = fmt.Errorf("%w: %w", program.ErrInvalid, err)
		}
		return err
	}
	ids, err := s.b.Add(spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, idsBody{IDs: nonNil(ids)})
	return nil
}

func (s *Server) remove(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !program.NamePattern.MatchString(name) {
		return fmt.Errorf("%w: %q is not a program name", program.ErrNotFound, name)
	}
	if err := s.b.Remove(r.Context(), name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
	return nil
}

// idsBody answers the operator actions and add.
type idsBody struct {
	IDs []string `json:"ids"`
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, s.b.Start)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, func(sel string) ([]string, error) { return s.b.Stop(r.Context(), sel) })
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request) error {
	return s.act(w, r, s.b.Restart)
}

// act runs an operator action on the selector in the path.
func (s *Server) act(w http.ResponseWriter, r *http.Request, do func(sel string) ([]string, error)) error {
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	ids, err := do(sel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, idsBody{IDs: nonNil(ids)})
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
