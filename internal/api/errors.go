package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

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
	case errors.Is(err, program.ErrNotProtocol), errors.Is(err, program.ErrNothingOpen), errors.Is(err, program.ErrNoTurn):
		return http.StatusConflict
	case errors.Is(err, program.ErrUnknownOption):
		return http.StatusBadRequest
	case errors.Is(err, program.ErrQueueFull):
		return http.StatusTooManyRequests
	case errors.Is(err, program.ErrStopping):
		return http.StatusServiceUnavailable
	case errors.Is(err, program.ErrNotKept): // docs/daemon.md#when-the-disk-fills
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, io.ErrShortWrite) {
			return http.StatusInsufficientStorage
		}
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

// writeJSONList is writeJSON of a list (the same bytes), encoded in parts
// (writeJSONParts).
func writeJSONList[T any](w http.ResponseWriter, code int, list []T) {
	writeJSONParts(w, code, len(list), func(_, from, to int) []T { return list[from:to] })
}

// writeJSONParts writes the JSON array of n elements, encoded in parts of
// listPart: as many parts at once as there are cores, each round written in
// order before the next is encoded. part(k, from, to) gives elements
// [from, to) to worker k (0 <= k < GOMAXPROCS), in a slice that may be k's
// own, reused at its next call. At ten thousand statuses the encoding is
// much of a listing's cost, and the answer is never held whole: a few
// parts' buffers, pooled, whatever the length.
func writeJSONParts[T any](w http.ResponseWriter, code int, n int, part func(k, from, to int) []T) {
	if n <= listPart {
		writeJSON(w, code, part(0, 0, n))
		return
	}
	round := runtime.GOMAXPROCS(0)
	parts := make([]*bytes.Buffer, round)
	for k := range parts {
		parts[k] = partPool.Get().(*bytes.Buffer)
	}
	defer func() {
		for _, p := range parts {
			partPool.Put(p)
		}
	}()
	for lo := 0; lo < n; lo += round * listPart {
		m := min(round, (n-lo+listPart-1)/listPart)
		var failed atomic.Bool
		parallel.Each(m, 1, func(k int) {
			from := lo + k*listPart
			parts[k].Reset()
			if err := json.NewEncoder(parts[k]).Encode(part(k, from, min(from+listPart, n))); err != nil {
				failed.Store(true)
			}
		})
		if failed.Load() {
			if lo == 0 { // say what encoding/json says, as writeJSON would
				writeJSON(w, code, part(0, 0, min(listPart, n)))
			}
			return // the answer is cut short, which its reader sees
		}
		if lo == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(code)
		}
		// Each part is "[a,b]\n": the list is "[" parts' insides joined by
		// "," "]\n".
		for k := range m {
			p := parts[k].Bytes()
			if lo+k*listPart > 0 {
				p[0] = ','
			}
			if lo+(k+1)*listPart < n {
				p = p[:len(p)-2]
			}
			if _, err := w.Write(p); err != nil {
				return // the client is gone
			}
		}
	}
}

// listPart is how many elements of a list writeJSONParts encodes at once
// on one core: about 80 KB of statuses.
const listPart = 128

// partPool holds writeJSONParts's part buffers.
var partPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
