package api

// Access over TCP (docs/api.md#who-may-call, docs/trust.md#tcp). The unix socket is trusted (unix.go); TCP is
// not, so the TCP front (tcp.go) puts the API behind guard:
//
//   - The Host header must name this server, else 421: no page of another
//     site reaches the API through a name of its own (DNS rebinding).
//   - Public routes (routes.go) are open: /healthz, /readyz (its ids only
//     with the token) and the login page. Socket-only routes are 404.
//   - Every other route needs "Authorization: Bearer TOKEN" (the CLI and
//     scripts) or a dashboard session (login.go): the session cookie and
//     the page's secret in the X-Tend-Page header. The cookie alone
//     (which the browser sends to every port of the host) gets the page
//     and its assets, and the attach WebSocket, whose first message must
//     then be the page secret (ttyattach.go); anything else is 401. A
//     wrong token is refused even if the request also carries a session.
//   - A session may do what the dashboard does (sessionRoutes): adding or
//     removing programs, reload, upgrade and shutdown need the token
//     (docs/trust.md#the-token-is-root): 403. A session request that
//     changes anything (not GET or HEAD) must also carry an Origin header
//     naming this very server.
//   - With TCPOptions.AddUnixOnly (api_add = "unix"), POST /v1/programs is
//     403 even with the token.
//   - Anything else is 401 with JSON, or for a browser asking for a page a
//     redirect to the login page.
//
// Secrets are compared in constant time (the token) or looked up by their
// SHA-256 digest (codes and sessions), so response timing tells nothing
// about them.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// How a request proved who it is.
type credential int

const (
	noCredential credential = iota
	byToken
	bySession // the cookie and its page's secret
	byCookie  // the cookie without its page's secret: page assets, attach
)

// viaTCP marks, in a request's context, one that came through guard, with
// what it proved. A request without it came over a trusted transport.
type viaTCP struct{ cred credential }

type viaKey struct{}

// overTCP reports whether r came through the TCP guard, and with what.
func overTCP(r *http.Request) (credential, bool) {
	v, ok := r.Context().Value(viaKey{}).(viaTCP)
	return v.cred, ok
}

// trusted reports whether r came over the unix socket or carries the token.
func trusted(r *http.Request) bool {
	cred, tcp := overTCP(r)
	return !tcp || cred == byToken
}

// sessionRoutes are what a dashboard session may use: what the dashboard
// does (docs/trust.md#dashboard-sessions). Every other private route,
// including any added later, needs the token. Patterns are compared with
// their wildcards' names left out (wildcardName), so {id} and {name}
// alike match.
var sessionRoutes = map[string]bool{
	"GET /{$}":                        true,
	"GET /ui/":                        true,
	"GET /v1/status":                  true,
	"GET /v1/status/{}":               true,
	"GET /v1/events":                  true,
	"GET /v1/logs/{}":                 true,
	"GET /v1/screen/{}":               true,
	"GET /v1/attach/{}":               true,
	"POST /v1/programs/{}/start":      true,
	"POST /v1/programs/{}/stop":       true,
	"POST /v1/programs/{}/restart":    true,
	"POST /v1/programs/{}/scale":      true,
	"POST /v1/programs/{}/input":      true,
	"POST /v1/programs/{}/prompt":     true, // protocol agents (docs/api.md)
	"POST /v1/programs/{}/cancel":     true,
	"POST /v1/programs/{}/permission": true,
	"POST /v1/logout":                 true,
}

// cookieRoutes are what the cookie alone gets: the page and its assets
// (a navigation sends no header, and they hold no data), and the attach
// WebSocket, which proves the page in its first message instead.
var cookieRoutes = map[string]bool{
	"GET /{$}":          true,
	"GET /ui/":          true,
	"GET /v1/attach/{}": true,
}

// addPattern is the route api_add = "unix" keeps off TCP.
const addPattern = "POST /v1/programs"

var wildcardName = regexp.MustCompile(`\{[A-Za-z_][A-Za-z0-9_]*(\.\.\.)?\}`)

// routeShape is a mux pattern with its wildcards' names left out.
func routeShape(pattern string) string { return wildcardName.ReplaceAllString(pattern, "{}") }

// guard is the access layer in front of the API on TCP; want is the
// token's digest; addUnixOnly refuses POST /v1/programs (api_add = "unix").
func (s *Server) guard(want [32]byte, hosts *hostCheck, addUnixOnly bool) http.Handler {
	api := s.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if !hosts.allowed(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, errorBody{Error: fmt.Sprintf(
				"Host %q is not this server: open it as %s (or through a loopback name)", r.Host, hosts.browser)})
			return
		}
		_, pattern := s.mux.Handler(r) // "" for no route: private, so unknown paths are refused unseen
		cred, err := s.credential(r, want)
		switch s.access[pattern] {
		case public:
			api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viaKey{}, viaTCP{cred})))
			return
		case socketOnly:
			writeJSON(w, http.StatusNotFound, errorBody{Error: "no such API path: " + r.URL.Path + " (only on the unix socket)"})
			return
		}
		shape := routeShape(pattern)
		if err == nil && cred == byCookie && !cookieRoutes[shape] {
			err = errNoPage
		}
		if err != nil {
			s.unauthorized(w, r, err.Error())
			return
		}
		if (cred == bySession || cred == byCookie) && !sessionRoutes[shape] {
			writeJSON(w, http.StatusForbidden, errorBody{Error: r.Method + " " + r.URL.Path +
				" needs the token or the unix socket: a dashboard session may not add or remove programs, reload, upgrade or shut down (docs/trust.md#dashboard-sessions)"})
			return
		}
		if addUnixOnly && pattern == addPattern {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "adding programs over TCP is refused here ([daemon] api_add = \"unix\"): " +
				"use the unix socket (tend run on the daemon's machine); the token is root-equivalent (docs/trust.md#the-token-is-root)"})
			return
		}
		if (cred == bySession || cred == byCookie) && changes(r) && !sameOrigin(r) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "cross-origin request refused: Origin must be " + ownOrigin(r)})
			return
		}
		if r.ContentLength > maxBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "request body is larger than 1 MiB"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viaKey{}, viaTCP{cred})))
	})
}

// errNoPage refuses the cookie without its page's secret.
var errNoPage = errors.New("this page is not logged in: a dashboard session belongs to the page that logged in, " +
	"which sends its secret in " + PageHeader + "; log in again in this tab (run tend dashboard for a code)")

// credential checks the bearer token, else the session cookie and the
// page's secret.
func (s *Server) credential(r *http.Request, want [32]byte) (credential, error) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, tok, _ := strings.Cut(auth, " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return noCredential, errors.New("wrong token")
		}
		return byToken, nil
	}
	if cookies := sessionCookies(r); len(cookies) > 0 {
		if s.login.browserOf(cookies) == "" {
			return noCredential, errors.New("session expired; run tend dashboard for a new login code")
		}
		page := r.Header.Get(PageHeader)
		switch {
		case page == "":
			return byCookie, nil
		case s.login.pageOf(cookies, page) != "":
			return bySession, nil
		}
		return noCredential, errNoPage
	}
	return noCredential, errors.New("missing token: send Authorization: Bearer TOKEN (the token is in state_dir/token)")
}

// sessionCookies are the values of every session cookie r carries. A page
// on another port of the host may set a cookie of the same name for it
// (cookies know no ports), with a longer path so that it comes first: each
// is tried, so such a cookie cannot log the dashboard out.
func sessionCookies(r *http.Request) []string {
	var out []string
	for _, c := range r.CookiesNamed(sessionCookie) {
		out = append(out, c.Value)
	}
	return out
}

// sameOrigin reports whether the request's Origin is this server itself.
func sameOrigin(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Origin"), ownOrigin(r))
}

func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// unauthorized sends a browser opening the dashboard to the login page,
// and answers 401 with JSON to everyone else.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	if wantsPage(r) {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="tend"`)
	writeJSON(w, http.StatusUnauthorized, errorBody{Error: msg})
}

// wantsPage reports whether r is a browser navigating to a page rather
// than a script calling the API.
func wantsPage(r *http.Request) bool {
	if r.URL.Path == "/" {
		return true
	}
	return !strings.HasPrefix(r.URL.Path, "/v1/") && strings.Contains(r.Header.Get("Accept"), "text/html")
}
