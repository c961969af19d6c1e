// Package api is tend's HTTP/JSON API: the routes in routes.go served over
// net/http on the daemon's unix socket (unix.go) and, behind an access guard,
// on TCP (tcp.go, access.go, login.go). It knows nothing of supervisors or the
// event log's storage: it serves a Backend and an Events log, which the
// daemon implements.
//
// Handlers return error and one function, writeError, turns every error into
// a status code and a JSON body {"error": "..."}. Streaming responses (log
// follow and the SSE event stream) end when the client goes away or Close is
// called, so shutting the daemon down never waits on a reader.
package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// Version is the daemon's version, reported by GET /healthz. "" is
	// reported as "dev".
	Version string

	// Activity, when not nil, is called as each request arrives: the
	// daemon uses it to notice when it has gone quiet. It must be cheap.
	Activity func()

	// Metrics serves GET /metrics (the Prometheus text format). nil: the
	// route answers 404.
	Metrics http.Handler

	// Terminals serves the terminal routes: GET /v1/screen/{id}, POST
	// /v1/programs/{id}/input and the WebSocket GET /v1/attach/{id}. nil:
	// they answer 501.
	Terminals Terminals

	// Protocols serves the protocol agents' routes: POST
	// /v1/programs/{id}/prompt, /cancel and /permission. nil: they answer
	// 501.
	Protocols Protocols
}

// Server serves the API. Create it with New, add listeners with ServeUnix,
// ServeTCP (or AttachTCP) or Serve, and stop it with Close.
type Server struct {
	b    Backend
	ev   Events
	opts Options
	mux  *http.ServeMux
	// access is each route pattern's exposure over TCP, set by routes and
	// read-only after.
	access map[string]access

	// done is closed by Close; streaming handlers select on it.
	done      chan struct{}
	closeOnce sync.Once

	// Timing of streaming responses; tests shorten them.
	keepalive time.Duration // SSE comment interval
	poll      time.Duration // log follow polling interval

	// login holds the one-time codes and sessions of the TCP access
	// layer (login.go); it guards itself.
	login logins

	// gate holds the listeners' Accepts while the API is paused for an
	// upgrade (pause.go); conns are every server's open connections, by
	// state, for Pause to wait on.
	gate     *gate
	connMu   sync.Mutex // guards conns
	connCond *sync.Cond
	conns    map[net.Conn]http.ConnState

	mu      sync.Mutex     // guards servers, closed and dashboard
	servers []*http.Server // one per Serve call
	closed  bool
	// dashboard is where a browser reaches the TCP front, such as
	// "http://127.0.0.1:7070" (set by AttachTCP; "" before).
	dashboard string
}

// Timeouts of the unix socket's http.Server. There is no write timeout: log
// follow and the event stream are long-lived responses, and whoever may
// connect is trusted. (TCP bounds each write instead: tcp.go.)
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// closeGrace is how long Close lets ordinary requests in flight finish
	// before it drops their connections.
	closeGrace = 2 * time.Second
)

// New returns a Server for b and ev.
func New(b Backend, ev Events, opts Options) *Server {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{
		b:         b,
		ev:        ev,
		opts:      opts,
		mux:       http.NewServeMux(),
		access:    map[string]access{},
		done:      make(chan struct{}),
		keepalive: 15 * time.Second,
		poll:      200 * time.Millisecond,
		gate:      newGate(),
		conns:     map[net.Conn]http.ConnState{},
	}
	s.connCond = sync.NewCond(&s.connMu)
	s.routes()
	return s
}

// Handler returns the API as an http.Handler (for tests and for serving on
// listeners the caller owns).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Serve serves the API on l, a trusted local transport (ServeUnix's socket,
// or a test's), until Close; it closes l. Requests are checked only as a
// browser's could be forged (localCheck). It returns nil after Close, and
// the listener's error otherwise.
func (s *Server) Serve(l net.Listener) error {
	return s.serve(l, &http.Server{
		Handler:           s.localCheck(s.Handler()),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         s.trackConn,
	})
}

// serve runs srv on l until Close.
func (s *Server) serve(l net.Listener, srv *http.Server) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops every listener, ends streaming responses at once, gives other
// requests in flight a short grace and then drops their connections. It
// never waits longer than that grace.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.Resume() // a Close during a Pause: the gate must not hold an Accept from its end
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if srv.Shutdown(ctx) != nil {
				srv.Close()
			}
		})
	}
	wg.Wait()
	return nil
}

// serveHTTP answers unknown paths and wrong methods with JSON like every
// other error, then hands the request to the mux.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Activity != nil {
		s.opts.Activity()
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// No route: let the mux say what it would do (404, 405 with Allow, or a
	// redirect to the clean path) without its plain-text body.
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.code {
	case http.StatusNotFound:
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such API path: " + r.URL.Path})
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: r.Method + " is not allowed on " + r.URL.Path})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
	}
}

// recorder keeps a response's status and headers and drops its body.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
