package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/tend-sh/tend/internal/parallel"
	"github.com/tend-sh/tend/internal/program"
)

// errorBody is every error response: {"error": "..."}, plus "lifecycle":
// "unknown" when a status lookup names no instance (docs/status.md#asking).
type errorBody struct {
	Error     string `json:"error"`
	Lifecycle string `json:"lifecycle,omitempty"`
}

// lookupError marks an error from a status lookup, whose 404 also says
// "lifecycle": "unknown".
type lookupError struct{ error }

func (e lookupError) Unwrap() error { return e.error }

// httpError carries its own status code, for errors of the HTTP layer
// itself (a bad query parameter).
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(msg string) error { return &httpError{http.StatusBadRequest, msg} }

// statusOf maps an error to its status code.
func statusOf(err error) int {
	var he *httpError
	var se *StatusError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.As(err, &se):
		return se.Code
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, program.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, program.ErrExists), errors.Is(err, program.ErrNotTerminal):
		return http.StatusConflict
	case errors.Is(err, program.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, program.ErrInvalid), errors.Is(err, program.ErrBadConfig), errors.Is(err, program.ErrBadLabel):
		return http.StatusBadRequest
	case errors.Is(err, program.ErrNotRunning):
		return http.StatusConflict
	case errors.Is(err, program.ErrStopping):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError is the one place an error becomes a response.
func writeError(w http.ResponseWriter, err error) {
	code := statusOf(err)
	body := errorBody{Error: err.Error()}
	var le lookupError
	if code == http.StatusNotFound && errors.As(err, &le) {
		body.Lifecycle = program.LifecycleUnknown
	}
	writeJSON(w, code, body)
}

// writeJSON writes v as the whole response, one JSON value and a newline.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v) // the client may be gone; nothing to tell
}

// writeJSONList is writeJSON of a list (the same bytes), with its parts
// encoded on all cores at once: at ten thousand statuses the encoding is
// much of a listing's cost.
func writeJSONList[T any](w http.ResponseWriter, code int, list []T) {
	bounds := parallel.Parts(len(list), 500)
	if len(bounds) <= 2 {
		writeJSON(w, code, list)
		return
	}
	parts := make([][]byte, len(bounds)-1)
	var failed atomic.Bool
	parallel.Each(len(parts), 1, func(k int) {
		b, err := json.Marshal(list[bounds[k]:bounds[k+1]])
		if err != nil {
			failed.Store(true)
		}
		parts[k] = b
	})
	if failed.Load() {
		writeJSON(w, code, list) // say what encoding/json says, as writeJSON would
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	// Each part is "[a,b]": the list is "[" parts' insides joined by "," "]".
	for k, p := range parts {
		sep := byte(',')
		if k == 0 {
			sep = '['
		}
		p[0] = sep
		if k == len(parts)-1 {
			p[len(p)-1] = ']'
			p = append(p, '\n')
		} else {
			p = p[:len(p)-1]
		}
		if _, err := w.Write(p); err != nil {
			return // the client is gone
		}
	}
}
