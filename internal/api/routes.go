package api

import (
	"net/http"

	"github.com/tend-sh/tend/internal/dashboard"
)

// routes lists the whole surface (docs/api.md#routes), with who may use each route over
// TCP. Ids in paths are selectors: "all", a program name, or "name:k".
//
// On the unix socket every route is served to whoever may connect (uid 0 or
// the daemon's own, checked with SO_PEERCRED: unix.go). Over TCP (access.go)
// a route is one of:
//
//   - private (the default): the bearer token, or for what the dashboard
//     does (access.go's sessionRoutes) a dashboard session;
//   - public: no credential (probes and the login page);
//   - socketOnly: not served at all (404), token or not.
//
// Dashboard login (login.go): POST /v1/dashboard/login, on the unix socket
// only, issues a one-time code for the dashboard on TCP and answers
// {"url", "login_url", "code", "id", "expires_at"} (404 when the daemon
// serves no TCP); a browser POSTs the code to /login as the form field
// "code". GET /v1/dashboard/login/{id} says whether that code is "pending",
// "used" or "expired", so tend dashboard --open knows when to remove the page
// it wrote.
func (s *Server) routes() {
	ui := dashboard.Handler()
	for _, rt := range []route{
		{"GET /healthz", public, s.handle(s.health)},
		{"GET /readyz", public, s.handle(s.ready)}, // the ids not ready only when trusted

		{"GET /v1/status", private, s.handle(s.list)},
		{"GET /v1/status/{id}", private, s.handle(s.status)},

		{"POST /v1/programs", private, s.handle(s.add)},
		{"DELETE /v1/programs/{name}", private, s.handle(s.remove)},
		{"DELETE /v1/programs", private, s.handle(s.removeAll)}, // ?label=: every program with those labels
		{"POST /v1/programs/{id}/start", private, s.handle(s.start)},
		{"POST /v1/programs/{id}/stop", private, s.handle(s.stop)},
		{"POST /v1/programs/{id}/restart", private, s.handle(s.restart)},
		{"POST /v1/programs/{name}/scale", private, s.handle(s.scale)},
		{"POST /v1/programs/{id}/signal", private, s.handle(s.signal)}, // an attached client's Ctrl-C

		// Terminals of tty instances (terminal.go, attach.go).
		{"GET /v1/screen/{id}", private, s.handle(s.screen)},
		{"POST /v1/programs/{id}/input", private, s.handle(s.input)},
		{"GET /v1/attach/{id}", private, s.handle(s.attach)}, // a WebSocket
		// Protocol agents (protocol.go).
		{"POST /v1/programs/{id}/prompt", private, s.handle(s.prompt)},
		{"POST /v1/programs/{id}/cancel", private, s.handle(s.cancelTurn)},
		{"POST /v1/programs/{id}/permission", private, s.handle(s.permission)},

		{"POST /v1/reload", private, s.handle(s.reload)},
		{"POST /v1/shutdown", private, s.handle(s.shutdown)},
		{"POST /v1/upgrade", private, s.handle(s.upgrade)},

		{"GET /v1/logs/{id}", private, s.handle(s.logs)},
		{"GET /v1/events", private, s.handle(s.events)},
		{"GET /v1/doctor", private, s.handle(s.doctor)},
		{"GET /metrics", private, s.metrics()}, // Options.Metrics

		// The dashboard: the page and its assets (package dashboard).
		{"GET /{$}", private, ui},
		{"GET /ui/", private, ui},

		// Its login (login.go).
		{"GET /login", public, s.handle(s.loginForm)},
		{"POST /login", public, s.handle(s.loginPost)},
		{"POST /v1/logout", private, s.handle(s.logout)},
		{"POST " + dashboardLoginPath, socketOnly, s.handle(s.issueLogin)},
		{"GET " + dashboardLoginPath + "/{id}", socketOnly, s.handle(s.loginState)},
	} {
		s.mux.Handle(rt.pattern, rt.h)
		s.access[rt.pattern] = rt.access
	}
}

// route is one entry of the surface.
type route struct {
	pattern string
	access  access
	h       http.Handler
}

// access says who may use a route over TCP.
type access int

const (
	private    access = iota // the token or a session
	public                   // anyone who reaches the port
	socketOnly               // nobody: the unix socket only
)

// handlerFunc is an API handler: it writes a response and returns nil, or
// writes nothing and returns the error for writeError to answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limitBodyTime(w, r)
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}

// metrics serves Options.Metrics, or answers 404 when there is none.
func (s *Server) metrics() http.Handler {
	if s.opts.Metrics != nil {
		return s.opts.Metrics
	}
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return &httpError{http.StatusNotFound, "this server has no metrics"}
	})
}
