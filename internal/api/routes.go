package api

import "net/http"

// routes lists the whole API surface (SPEC 9). Ids in paths are selectors:
// "all", a program name, or "name:k".
func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.handle(s.health))
	s.mux.HandleFunc("GET /readyz", s.handle(s.ready))

	s.mux.HandleFunc("GET /v1/status", s.handle(s.list))
	s.mux.HandleFunc("GET /v1/status/{id}", s.handle(s.status))

	s.mux.HandleFunc("POST /v1/programs", s.handle(s.add))
	s.mux.HandleFunc("DELETE /v1/programs/{name}", s.handle(s.remove))
	s.mux.HandleFunc("POST /v1/programs/{id}/start", s.handle(s.start))
	s.mux.HandleFunc("POST /v1/programs/{id}/stop", s.handle(s.stop))
	s.mux.HandleFunc("POST /v1/programs/{id}/restart", s.handle(s.restart))
	s.mux.HandleFunc("POST /v1/programs/{name}/scale", s.handle(s.scale))

	s.mux.HandleFunc("POST /v1/reload", s.handle(s.reload))
	s.mux.HandleFunc("POST /v1/shutdown", s.handle(s.shutdown))

	s.mux.HandleFunc("GET /v1/logs/{id}", s.handle(s.logs))
	s.mux.HandleFunc("GET /v1/events", s.handle(s.events))
	s.mux.HandleFunc("GET /v1/doctor", s.handle(s.doctor))
}

// handlerFunc is an API handler: it writes a response and returns nil, or
// writes nothing and returns the error for writeError to answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limitBodyTime(w, r)
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	}
}
