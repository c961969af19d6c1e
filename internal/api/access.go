package api

// Access over TCP (SPEC 9). The unix socket is trusted (mode 0600); TCP is
// not, so ServeTCP puts the API behind a guard:
//
//   - GET /healthz is open.
//   - A request carrying "Authorization: Bearer TOKEN" with the daemon's
//     token passes (the CLI and scripts). A wrong token is refused even if
//     the request also carries a session cookie.
//   - A browser logs in with a one-time code: GET /login?code=C, with a code
//     from LoginCode (the unix-socket route POST /v1/dashboard/login hands
//     out URLs holding one), sets an HttpOnly, SameSite=Strict session
//     cookie. A request with a live session passes; if it changes anything
//     (not GET or HEAD) it must also carry an Origin header naming this very
//     server, so no other page can drive the daemon through the browser.
//   - Anything else is 401: a short HTML page for a browser asking for the
//     dashboard, JSON for the API.
//
// Secrets are compared in constant time (the token) or looked up by their
// SHA-256 digest (codes and sessions), so response timing tells nothing
// about them.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Timeouts of the TCP server: shorter than the unix socket's, since anyone
// on the network may open a connection. There is still no write timeout:
// log follow and the event stream are long-lived responses.
const (
	tcpReadHeaderTimeout = 5 * time.Second
	tcpIdleTimeout       = 60 * time.Second
	tcpMaxHeaderBytes    = 64 << 10
)

// Logins: a code lives a minute and works once; a session lives half a day.
// The caps bound memory however many codes are asked for: the oldest entry
// makes room for a new one.
const (
	codeTTL       = 60 * time.Second
	sessionTTL    = 12 * time.Hour
	maxCodes      = 256
	maxSessions   = 1024
	sessionCookie = "tend_session"
)

// dashboardLoginPath is the unix-socket route that hands out login URLs.
const dashboardLoginPath = "/v1/dashboard/login"

// logins holds the live one-time codes and sessions of one Server, each by
// the SHA-256 digest of its secret, with its expiry. The zero value is
// ready to use.
type logins struct {
	mu       sync.Mutex             // guards the fields below
	now      func() time.Time       // nil = time.Now; tests move it
	codes    map[[32]byte]time.Time // digest -> expiry
	sessions map[[32]byte]time.Time // digest -> expiry
	enabled  bool                   // EnableDashboardLogin has run
}

func (l *logins) nowLocked() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// issueCode returns a fresh one-time code and when it expires.
func (l *logins) issueCode() (string, time.Time) {
	code := randomSecret()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.codes == nil {
		l.codes = map[[32]byte]time.Time{}
	}
	exp := l.nowLocked().Add(codeTTL)
	addBounded(l.codes, sha256.Sum256([]byte(code)), exp, l.nowLocked(), maxCodes)
	return code, exp
}

// redeem uses up code and returns a new session id, or reports false if
// the code is unknown, used or expired.
func (l *logins) redeem(code string) (string, bool) {
	if code == "" {
		return "", false
	}
	sid := randomSecret()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := sha256.Sum256([]byte(code))
	exp, ok := l.codes[d]
	delete(l.codes, d) // single use, whatever happens next
	now := l.nowLocked()
	if !ok || !now.Before(exp) {
		return "", false
	}
	if l.sessions == nil {
		l.sessions = map[[32]byte]time.Time{}
	}
	addBounded(l.sessions, sha256.Sum256([]byte(sid)), now.Add(sessionTTL), now, maxSessions)
	return sid, true
}

// valid reports whether sid is a live session.
func (l *logins) valid(sid string) bool {
	if sid == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.sessions[sha256.Sum256([]byte(sid))]
	return ok && l.nowLocked().Before(exp)
}

// addBounded adds key to m after dropping expired entries and, if m is
// still full, the one that expires first.
func addBounded(m map[[32]byte]time.Time, key [32]byte, exp, now time.Time, max int) {
	for k, e := range m {
		if !now.Before(e) {
			delete(m, k)
		}
	}
	if len(m) >= max {
		var oldest [32]byte
		var first time.Time
		for k, e := range m {
			if first.IsZero() || e.Before(first) {
				oldest, first = k, e
			}
		}
		delete(m, oldest)
	}
	m[key] = exp
}

// randomSecret is 32 random bytes, URL-safe. (crypto/rand.Read never
// fails: the runtime aborts rather than hand out weak randomness.)
func randomSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// LoginCode issues a one-time code for GET /login?code=C on the TCP
// listener: valid for a minute, good for one session.
func (s *Server) LoginCode() string {
	code, _ := s.login.issueCode()
	return code
}

// loginBody answers POST /v1/dashboard/login.
type loginBody struct {
	URL       string       `json:"url"`
	Code      string       `json:"code"`
	ExpiresAt program.Time `json:"expires_at"`
}

// EnableDashboardLogin registers POST /v1/dashboard/login, which answers
// {"url": "http://ADDR/login?code=CODE", "code": ..., "expires_at": ...}
// for the TCP listener at httpAddr (an unspecified host such as 0.0.0.0 is
// written as 127.0.0.1). The route is refused over TCP: only the unix
// socket, whose owner is trusted, hands out logins. Later calls do nothing.
func (s *Server) EnableDashboardLogin(httpAddr string) {
	s.login.mu.Lock()
	done := s.login.enabled
	s.login.enabled = true
	s.login.mu.Unlock()
	if done {
		return
	}
	base := "http://" + browserHost(httpAddr)
	s.mux.HandleFunc("POST "+dashboardLoginPath, s.handle(func(w http.ResponseWriter, r *http.Request) error {
		code, exp := s.login.issueCode()
		writeJSON(w, http.StatusOK, loginBody{URL: base + "/login?code=" + code, Code: code, ExpiresAt: program.Time{Time: exp}})
		return nil
	}))
}

// browserHost is addr as a browser should dial it: a listener on every
// address is reached through the loopback one.
func browserHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// ServeTCP serves the API on l behind the access guard until Close; it
// closes l. token is what "Authorization: Bearer" must carry; it must not
// be empty. It returns nil after Close, and the listener's error otherwise.
func (s *Server) ServeTCP(l net.Listener, token string) error {
	if token == "" {
		l.Close()
		return errors.New("api: ServeTCP without a token")
	}
	srv := &http.Server{
		Handler:           s.guard(token),
		ReadHeaderTimeout: tcpReadHeaderTimeout,
		IdleTimeout:       tcpIdleTimeout,
		MaxHeaderBytes:    tcpMaxHeaderBytes,
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.servers = append(s.servers, srv) // so Close shuts it down
	s.mu.Unlock()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// untrustedKey marks a request the guard let through without credentials.
type untrustedKey struct{}

// trusted reports whether r came over the unix socket or proved itself.
func trusted(r *http.Request) bool { return r.Context().Value(untrustedKey{}) == nil }

// How a request proved who it is.
type credential int

const (
	noCredential credential = iota
	byToken
	bySession
)

// guard is the access layer in front of the API on TCP.
func (s *Server) guard(token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	api := s.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		switch p := path.Clean(r.URL.Path); {
		case p == "/healthz":
			api.ServeHTTP(w, r)
			return
		case p == "/readyz":
			// Open to probes, but the ids not ready only with the token.
			if cred, err := s.credential(r, want); err != nil || cred != byToken {
				r = r.WithContext(context.WithValue(r.Context(), untrustedKey{}, true))
			}
			api.ServeHTTP(w, r)
			return
		case p == "/login":
			s.loginPage(w, r)
			return
		case strings.HasPrefix(p, dashboardLoginPath):
			writeJSON(w, http.StatusNotFound, errorBody{Error: "no such API path: " + r.URL.Path + " (only on the unix socket)"})
			return
		}
		cred, err := s.credential(r, want)
		if err != nil {
			s.unauthorized(w, r, err.Error())
			return
		}
		if cred == bySession && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: "cross-origin request refused: Origin must be " + ownOrigin(r)})
			return
		}
		if r.ContentLength > maxBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: "request body is larger than 1 MiB"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		api.ServeHTTP(w, r)
	})
}

// credential checks the bearer token, else the session cookie.
func (s *Server) credential(r *http.Request, want [32]byte) (credential, error) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, tok, _ := strings.Cut(auth, " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return noCredential, errors.New("wrong token")
		}
		return byToken, nil
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if s.login.valid(c.Value) {
			return bySession, nil
		}
		return noCredential, errors.New("session expired; run tend dashboard for a new login link")
	}
	return noCredential, errors.New("missing token: send Authorization: Bearer TOKEN (the token is in state_dir/token)")
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

// unauthorized answers 401: HTML to a browser opening the dashboard, JSON
// to everyone else.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	if wantsPage(r) {
		writePage(w, http.StatusUnauthorized, "Log in to tend",
			"This dashboard needs a login link. Run <code>tend dashboard</code> (or <code>tend dashboard --open</code>) on the daemon's machine and open the link it prints.")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="tend"`)
	writeJSON(w, http.StatusUnauthorized, errorBody{Error: msg})
}

// wantsPage reports whether r is a browser navigating to a page rather
// than a script calling the API.
func wantsPage(r *http.Request) bool {
	if r.URL.Path == "/" || r.URL.Path == "/login" {
		return true
	}
	return !strings.HasPrefix(r.URL.Path, "/v1/") && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// loginPage answers GET /login?code=C: a valid code becomes a session
// cookie and a redirect to the dashboard. A browser that already holds a
// live session (a reloaded login tab) just goes on to the dashboard.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet { // not even HEAD: a link checker must not use up the code
		w.Header().Set("Allow", "GET")
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: r.Method + " is not allowed on /login"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	sid, ok := s.login.redeem(r.URL.Query().Get("code"))
	if !ok {
		if c, err := r.Cookie(sessionCookie); err == nil && s.login.valid(c.Value) {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		writePage(w, http.StatusUnauthorized, "Login link expired",
			"This login link is unknown, used or expired: each one works once, within a minute. Run <code>tend dashboard</code> for a new one.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    sid,
		Path:     "/",
		MaxAge:   int(sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// writePage writes a small self-contained HTML page; body is trusted HTML.
func writePage(w http.ResponseWriter, code int, title, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>%[1]s · tend</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#1f2937}
h1{font-size:1.4rem}code{background:#f3f4f6;padding:.1rem .3rem;border-radius:4px}</style></head>
<body><main><h1>%[1]s</h1><p>%[2]s</p></main></body></html>
`, html.EscapeString(title), body)
}
