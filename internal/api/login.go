package api

// Dashboard login (docs/trust.md#dashboard-login). A browser on TCP logs in with a one-time code:
// its owner asks the unix socket for one (POST /v1/dashboard/login, which
// tend dashboard calls) and the browser POSTs it to /login as the form
// field "code", typed into the login page or sent by the page tend
// dashboard --open writes. A code never travels in a URL: URLs end up in
// argv (xdg-open's, readable in /proc by every local user), in browser
// history and in logs, so GET /login ignores any code= in its query.
//
// A good code sets an HttpOnly, SameSite=Strict session cookie and answers
// with a page that keeps a second secret, the page's, in sessionStorage
// and goes on to "/" by itself (docs/trust.md#dashboard-sessions). A
// cookie alone proves nothing: browsers send it to every port of the
// host, so any local user's web server on another port receives it. The
// page secret is readable by this origin alone, port included, and the
// page sends it in the X-Tend-Page header of every request (and as the
// first message of the attach WebSocket, which takes no headers). A
// redirect would not do for going on: the --open page is a file:// page,
// so its POST is cross-site, and a Strict cookie set by that response is
// not sent on a redirect of the same navigation. The script's navigation
// is a new one started by this site's own page, and it carries the cookie.

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
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
	maxLoginForm  = 4 << 10
	// PageHeader carries a page's secret on every request of the
	// dashboard (docs/trust.md#dashboard-sessions).
	PageHeader = "X-Tend-Page"
	// pageKey is where the page keeps its secret: sessionStorage, which
	// only its own origin (port included) reads, unlike a cookie.
	pageKey = "tend_page"
)

// dashboardLoginPath is the unix-socket route that hands out login codes.
const dashboardLoginPath = "/v1/dashboard/login"

// logins holds the live one-time codes and sessions of one Server, each by
// the SHA-256 digest of its secret, in memory only: sessions end with the
// daemon. A session is two secrets (docs/trust.md#dashboard-sessions): the
// browser's cookie, which the browser also sends to every other port of
// the host, and the page's, which only the page that logged in can read.
// One browser (cookie) may have several pages logged in, one per login.
// The zero value is ready to use.
type logins struct {
	mu       sync.Mutex               // guards the fields below
	now      func() time.Time         // nil = time.Now; tests move it
	codes    map[[32]byte]*loginCode  // digest -> the code's fate
	browsers map[[32]byte]time.Time   // cookie digest -> expiry
	pages    map[[32]byte]pageSession // page secret digest -> its browser
}

// pageSession is one logged-in page: the browser (cookie digest) it
// belongs to, and when it expires.
type pageSession struct {
	browser [32]byte
	exp     time.Time
}

// loginCode is what is kept of a code: when it expires and whether a
// browser used it (kept until expiry, for GET /v1/dashboard/login/{id}).
type loginCode struct {
	exp  time.Time
	used bool
}

func (l *logins) nowLocked() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// issueCode returns a fresh one-time code, the id naming it (the hex
// digest: not a secret) and when it expires.
func (l *logins) issueCode() (code, id string, exp time.Time) {
	code = newCode()
	d := sha256.Sum256([]byte(normalCode(code)))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.codes == nil {
		l.codes = map[[32]byte]*loginCode{}
	}
	now := l.nowLocked()
	exp = now.Add(codeTTL)
	addBounded(l.codes, d, &loginCode{exp: exp}, func(c *loginCode) time.Time { return c.exp }, now, maxCodes)
	return code, hex.EncodeToString(d[:]), exp
}

// redeem uses up code and returns the browser's cookie and a new page
// secret, or reports false if the code is unknown, used or expired. A
// browser that has a live cookie keeps it (its other logged-in tabs go
// on), with its expiry renewed; any other gets a new one.
func (l *logins) redeem(code, cookie string) (sid, page string, ok bool) {
	code = normalCode(code)
	if code == "" {
		return "", "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.nowLocked()
	c, known := l.codes[sha256.Sum256([]byte(code))]
	if !known || c.used || !now.Before(c.exp) {
		return "", "", false
	}
	c.used = true // single use, whatever happens next
	if l.browsers == nil {
		l.browsers = map[[32]byte]time.Time{}
		l.pages = map[[32]byte]pageSession{}
	}
	sid = cookie
	if !l.browserLocked(cookie) {
		sid = randomSecret()
	}
	page = randomSecret()
	b := sha256.Sum256([]byte(sid))
	exp := now.Add(sessionTTL)
	addBounded(l.browsers, b, exp, func(t time.Time) time.Time { return t }, now, maxSessions)
	addBounded(l.pages, sha256.Sum256([]byte(page)), pageSession{browser: b, exp: exp},
		func(p pageSession) time.Time { return p.exp }, now, maxSessions)
	return sid, page, true
}

// state says what became of the code with this id: "pending", "used" or
// "expired" (also for a code forgotten after its expiry). ok is false for
// a malformed id.
func (l *logins) state(id string) (state string, ok bool) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != sha256.Size {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c, known := l.codes[[32]byte(b)]
	switch {
	case known && c.used:
		return "used", true
	case known && l.nowLocked().Before(c.exp):
		return "pending", true
	}
	return "expired", true
}

// browser reports whether cookie is a live browser session: enough to be
// served the dashboard's page and assets, nothing else.
func (l *logins) browser(cookie string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.browserLocked(cookie)
}

func (l *logins) browserLocked(cookie string) bool {
	if cookie == "" {
		return false
	}
	exp, ok := l.browsers[sha256.Sum256([]byte(cookie))]
	return ok && l.nowLocked().Before(exp)
}

// browserOf returns the first of cookies that is a live browser session,
// or "".
func (l *logins) browserOf(cookies []string) string {
	for _, c := range cookies {
		if l.browser(c) {
			return c
		}
	}
	return ""
}

// pageOf returns the one of cookies whose live page session page is, or "".
func (l *logins) pageOf(cookies []string, page string) string {
	for _, c := range cookies {
		if l.valid(c, page) {
			return c
		}
	}
	return ""
}

// valid reports whether page is a live page session of the browser
// whose cookie this is.
func (l *logins) valid(cookie, page string) bool {
	if cookie == "" || page == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.pages[sha256.Sum256([]byte(page))]
	b := sha256.Sum256([]byte(cookie))
	return ok && l.nowLocked().Before(p.exp) && subtle.ConstantTimeCompare(p.browser[:], b[:]) == 1 && l.browserLocked(cookie)
}

// logout ends the page session page of the browser cookie; last reports
// that the browser has no other page logged in, and is forgotten too.
func (l *logins) logout(cookie, page string) (last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pd, b := sha256.Sum256([]byte(page)), sha256.Sum256([]byte(cookie))
	if p, ok := l.pages[pd]; ok && p.browser == b {
		delete(l.pages, pd)
	}
	for _, p := range l.pages {
		if p.browser == b && l.nowLocked().Before(p.exp) {
			return false
		}
	}
	delete(l.browsers, b)
	return true
}

// addBounded adds key to m after dropping expired entries and, if m is
// still full, the one that expires first.
func addBounded[V any](m map[[32]byte]V, key [32]byte, v V, expiry func(V) time.Time, now time.Time, max int) {
	for k, e := range m {
		if !now.Before(expiry(e)) {
			delete(m, k)
		}
	}
	if len(m) >= max {
		var oldest [32]byte
		var first time.Time
		for k, e := range m {
			if exp := expiry(e); first.IsZero() || exp.Before(first) {
				oldest, first = k, exp
			}
		}
		delete(m, oldest)
	}
	m[key] = v
}

// newCode is 120 random bits as four groups of six base32 letters and
// digits ("ABCDEF-GHIJKL-..."): easy to read out and to type, and far
// beyond guessing within a code's minute.
func newCode() string {
	b := make([]byte, 15)
	rand.Read(b) // never fails: the runtime aborts rather than hand out weak randomness
	s := base32.StdEncoding.EncodeToString(b)
	return s[0:6] + "-" + s[6:12] + "-" + s[12:18] + "-" + s[18:24]
}

// normalCode is a code as typed, without case, spaces or dashes.
func normalCode(code string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == ' ' || r == '\t':
			return -1
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, code)
}

// randomSecret is 32 random bytes, URL-safe: a session id.
func randomSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loginBody answers POST /v1/dashboard/login.
type loginBody struct {
	URL       string       `json:"url"`       // the dashboard
	LoginURL  string       `json:"login_url"` // its login form, where the code is POSTed
	Code      string       `json:"code"`
	ID        string       `json:"id"` // for GET /v1/dashboard/login/{id}
	ExpiresAt program.Time `json:"expires_at"`
}

// issueLogin answers POST /v1/dashboard/login (unix socket only).
func (s *Server) issueLogin(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	base := s.dashboard
	s.mu.Unlock()
	if base == "" {
		return &httpError{http.StatusNotFound, "the daemon serves no dashboard over TCP ([daemon] http is not set)"}
	}
	code, id, exp := s.login.issueCode()
	writeJSON(w, http.StatusOK, loginBody{URL: base + "/", LoginURL: base + "/login", Code: code, ID: id, ExpiresAt: program.Time{Time: exp}})
	return nil
}

// loginState answers GET /v1/dashboard/login/{id} (unix socket only).
func (s *Server) loginState(w http.ResponseWriter, r *http.Request) error {
	st, ok := s.login.state(r.PathValue("id"))
	if !ok {
		return &httpError{http.StatusNotFound, "not a login code id"}
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": st})
	return nil
}

// loginForm answers GET /login: the form a code is typed into. It takes
// no code itself. The unix socket (through a tunnel) needs no login and
// goes on to the dashboard. Over TCP the form is shown even to a browser
// with a live cookie: the server cannot tell whether this tab holds its
// page secret, and a tab without one must log in (a redirect to "/"
// would send it straight back here).
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) error {
	if _, tcp := overTCP(r); !tcp {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	writeLoginPage(w, http.StatusOK, "")
	return nil
}

// loginPost answers POST /login with the form field "code": a good code
// sets the browser's cookie and answers with a page that puts the page
// secret into sessionStorage and goes on to "/" (docs/trust.md#dashboard-sessions).
// That answer is read by this origin only: another port's page may make
// the browser send this POST (it has no code to send), never read what
// comes back.
func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) error {
	if _, tcp := overTCP(r); !tcp {
		http.Redirect(w, r, "/", http.StatusSeeOther) // the socket needs no login
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	cookie := s.login.browserOf(sessionCookies(r))
	sid, page, ok := s.login.redeem(r.PostFormValue("code"), cookie) // the body only, never the query
	if !ok {
		writeLoginPage(w, http.StatusUnauthorized,
			"That code is unknown, used or expired: each works once, within a minute. Run <code>tend dashboard</code> for a new one.")
		return nil
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
	// The script is the page's own (a nonce, not 'unsafe-inline'); the
	// secret is base64url, so it needs no escaping inside the string. A
	// script navigation, like the meta refresh before it, is a new
	// navigation started by this site, so it carries the Strict cookie
	// even after the cross-site POST of tend dashboard --open's page.
	nonce := randomSecret()
	script := fmt.Sprintf(`<script nonce="%s">sessionStorage.setItem(%q, %q); location.replace("/");</script>`, nonce, pageKey, page)
	writePageCSP(w, http.StatusOK, "Logged in", script,
		`Logged in for 12 hours, in this tab. <noscript>The dashboard needs JavaScript.</noscript><a href="/">Open the dashboard</a>.`,
		"script-src 'nonce-"+nonce+"'; ")
	return nil
}

// logout answers POST /v1/logout: it ends the dashboard session (this
// page's) that sends it, and clears the cookie once the browser has no
// other page logged in. With the token or over the unix socket there is
// no session to end.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if cred, _ := overTCP(r); cred != bySession {
		return badRequest("no dashboard session to end: POST /v1/logout ends the session of the dashboard page that sends it")
	}
	page := r.Header.Get(PageHeader)
	cookie := s.login.pageOf(sessionCookies(r), page)
	if cookie == "" {
		return badRequest("no dashboard session to end")
	}
	if s.login.logout(cookie, page) {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// writeLoginPage writes the login form; problem is trusted HTML, shown above it.
func writeLoginPage(w http.ResponseWriter, code int, problem string) {
	body := `Enter the one-time code that <code>tend dashboard</code> prints on the daemon's machine.
A code works once, within a minute; the session lasts 12 hours.</p>
<form method="post" action="/login"><label for="code">Code</label>
<input id="code" name="code" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" required autofocus>
<button type="submit">Log in</button></form><p>`
	if problem != "" {
		body = `<strong>` + problem + `</strong></p><p>` + body
	}
	writePage(w, code, "Log in to tend", "", body)
}

// writePage writes a small self-contained HTML page; head and body are
// trusted HTML.
func writePage(w http.ResponseWriter, code int, title, head, body string) {
	writePageCSP(w, code, title, head, body, "")
}

// writePageCSP is writePage with more of a Content-Security-Policy
// (directives each ending in "; ").
func writePageCSP(w http.ResponseWriter, code int, title, head, body, csp string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; "+csp+"style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
%[3]s<title>%[1]s · tend</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#1f2937}
h1{font-size:1.4rem}code{background:#f3f4f6;padding:.1rem .3rem;border-radius:4px}
input{font:inherit;font-family:monospace;padding:.3rem;width:18rem;margin:0 .5rem}button{font:inherit}</style></head>
<body><main><h1>%[1]s</h1><p>%[2]s</p></main></body></html>
`, html.EscapeString(title), body, head)
}
