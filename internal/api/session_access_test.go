package api

// Dashboard sessions bound to their page (docs/trust.md#dashboard-sessions),
// tried as an attacker on the same machine would: another local user's
// web server on another port of 127.0.0.1 receives the browser's cookie
// (browsers send a cookie to every port of a host), and sends it with any
// Origin it likes.

import (
	"net/http"
	"strings"
	"testing"
)

func TestTCPCookieAloneRefused(t *testing.T) {
	f := newTCP(t)
	sess := f.login(t)
	stolen := sess.String()
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/status", ""},
		{"GET", "/v1/status/web:0", ""},
		{"GET", "/v1/events?format=json", ""},
		{"GET", "/v1/logs/web:0", ""},
		{"POST", "/v1/programs/web:0/restart", ""},
		{"POST", "/v1/programs", `{"name": "pwn", "command": ["sh", "-c", "id > /tmp/x"], "user": "root"}`},
		{"POST", "/v1/logout", ""},
		{"GET", "/metrics", ""},
	} {
		for _, page := range []string{"", "wrong", sess.Value} {
			hdr := []string{"Cookie", stolen, "Origin", f.base, "Content-Type", "application/json"}
			if page != "" {
				hdr = append(hdr, PageHeader, page)
			}
			r := f.do(t, req.method, req.path, strings.NewReader(req.body), hdr...)
			jsonError(t, req.method+" "+req.path+" with the cookie and page "+page, r, http.StatusUnauthorized)
		}
	}
	if got := f.b.Restarts(); len(got) != 0 {
		t.Errorf("the cookie alone restarted %v", got)
	}
	// The page and its assets hold no data: the cookie gets them (a
	// navigation sends no header), and the page then logs in if its tab
	// has no secret.
	if r := f.do(t, "GET", "/", nil, "Cookie", stolen, "Accept", "text/html"); r.code != 200 {
		t.Errorf("GET / with the cookie: %d, want the page", r.code)
	}
	// The page that logged in does everything the dashboard does.
	if r := f.do(t, "GET", "/v1/status", nil, sess.hdr()...); r.code != 200 {
		t.Errorf("GET /v1/status from the page: %d %s", r.code, r.body)
	}
}

func TestTCPSessionCannotAdd(t *testing.T) {
	f := newTCP(t)
	sess := f.login(t)
	add := `{"name": "pwn", "command": ["sh", "-c", "id > /tmp/x"], "user": "root"}`
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/programs", add},
		{"POST", "/v1/programs?attach=1", add},
		{"DELETE", "/v1/programs/web", ""},
		{"DELETE", "/v1/programs?label=a=b", ""},
		{"POST", "/v1/reload", ""},
		{"POST", "/v1/upgrade", ""},
		{"POST", "/v1/shutdown", ""},
		{"POST", "/v1/programs/web:0/signal", `{"signal": "INT"}`},
		{"GET", "/v1/doctor", ""},
		{"GET", "/metrics", ""},
	} {
		r := f.do(t, req.method, req.path, strings.NewReader(req.body), sess.hdr("Origin", f.base, "Content-Type", "application/json")...)
		jsonError(t, "a session: "+req.method+" "+req.path, r, http.StatusForbidden)
		if r.code == http.StatusForbidden && !strings.Contains(r.body, "token") {
			t.Errorf("%s %s: %q does not say the token is needed", req.method, req.path, r.body)
		}
	}
	// The token may (the stub backend refuses the spec: not 403).
	r := f.do(t, "POST", "/v1/programs", strings.NewReader(add), "Authorization", "Bearer "+testToken)
	if r.code == http.StatusForbidden || r.code == http.StatusUnauthorized {
		t.Errorf("POST /v1/programs with the token: %d %s", r.code, r.body)
	}
}

// What a session may do is listed by route shape, so a route of the
// dashboard's added elsewhere (protocol agents') matches whatever its
// wildcard is called, and any other route needs the token.
func TestSessionRoutes(t *testing.T) {
	for pattern, want := range map[string]bool{
		"POST /v1/programs/{id}/prompt":     true,
		"POST /v1/programs/{name}/cancel":   true,
		"POST /v1/programs/{id}/permission": true,
		"GET /{$}":                          true,
		"POST /v1/programs/{id}/start":      true,
		"POST /v1/programs":                 false,
		"DELETE /v1/programs/{name}":        false,
		"POST /v1/programs/{id}/signal":     false,
		"POST /v1/future":                   false,
		"":                                  false,
	} {
		if got := sessionRoutes[routeShape(pattern)]; got != want {
			t.Errorf("a session on %q: %v, want %v", pattern, got, want)
		}
	}
	// Every route the server has is either listed or not; check that each
	// listed shape names a route the server has (or the protocol agents'
	// three, added by their own file), so a typo cannot go unnoticed.
	srv := New(&stubBackend{}, stubEvents{}, Options{})
	have := map[string]bool{}
	for p := range srv.access {
		have[routeShape(p)] = true
	}
	for shape := range sessionRoutes {
		if !have[shape] && !strings.HasSuffix(shape, "/prompt") && !strings.HasSuffix(shape, "/cancel") && !strings.HasSuffix(shape, "/permission") {
			t.Errorf("sessionRoutes lists %q, which is no route", shape)
		}
	}
}

func TestTCPLogout(t *testing.T) {
	f := newTCP(t)
	a := f.login(t)
	b := f.login(t, "Cookie", a.String()) // another tab of the same browser
	// Logout needs the page too: the cookie alone cannot end a session.
	jsonError(t, "logout with the cookie alone", f.do(t, "POST", "/v1/logout", nil, "Cookie", a.String(), "Origin", f.base), http.StatusUnauthorized)
	r := f.do(t, "POST", "/v1/logout", nil, a.hdr("Origin", f.base)...)
	if r.code != http.StatusNoContent || sessionOf(r) != nil {
		t.Errorf("logout of one tab of two: %d %v, want 204 keeping the cookie", r.code, r.hdr)
	}
	jsonError(t, "the page after its logout", f.do(t, "GET", "/v1/status", nil, a.hdr()...), http.StatusUnauthorized)
	if r := f.do(t, "GET", "/v1/status", nil, b.hdr()...); r.code != 200 {
		t.Errorf("the other tab after the first's logout: %d %s", r.code, r.body)
	}
	r = f.do(t, "POST", "/v1/logout", nil, b.hdr("Origin", f.base)...)
	c := sessionOf(r)
	if r.code != http.StatusNoContent || c == nil || c.MaxAge >= 0 {
		t.Errorf("logout of the last tab: %d %v, want 204 clearing the cookie", r.code, r.hdr)
	}
	jsonError(t, "the last page after its logout", f.do(t, "GET", "/v1/status", nil, b.hdr()...), http.StatusUnauthorized)
	if r := f.do(t, "GET", "/", nil, "Cookie", a.String(), "Accept", "text/html"); r.code != http.StatusSeeOther {
		t.Errorf("the cookie after the last logout: %d, want 303 to the login page", r.code)
	}
	// A logout from another site is refused like any change.
	d := f.login(t)
	jsonError(t, "cross-origin logout", f.do(t, "POST", "/v1/logout", nil, d.hdr("Origin", "http://127.0.0.1:1")...), http.StatusForbidden)
	jsonError(t, "logout with the token", f.do(t, "POST", "/v1/logout", nil, "Authorization", "Bearer "+testToken), http.StatusBadRequest)
}

// Sessions live in the Server's memory alone: a new Server (the daemon
// started again) knows none of the old one's.
func TestSessionsEndWithServer(t *testing.T) {
	f := newTCP(t)
	sess := f.login(t)
	g := newTCP(t)
	jsonError(t, "an old session on a new server", g.do(t, "GET", "/v1/status", nil, sess.hdr()...), http.StatusUnauthorized)
}

// api_add = "unix": the token cannot add programs over TCP.
func TestTCPAddUnixOnly(t *testing.T) {
	f := newTCPWith(t, TCPOptions{AddUnixOnly: true}, stubEvents{})
	r := f.do(t, "POST", "/v1/programs", strings.NewReader(`{"name": "x", "command": ["true"]}`), "Authorization", "Bearer "+testToken)
	jsonError(t, "POST /v1/programs with the token, api_add = unix", r, http.StatusForbidden)
	if !strings.Contains(r.body, `api_add = \"unix\"`) {
		t.Errorf("the refusal %q does not name api_add", r.body)
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/restart", nil, "Authorization", "Bearer "+testToken); r.code != 200 {
		t.Errorf("restart with the token, api_add = unix: %d %s", r.code, r.body)
	}
}

// Another port's page may set a session cookie of its own for the host
// (cookies know no ports), which the browser then sends first: the real
// one still works, and the junk one proves nothing.
func TestTCPTossedCookie(t *testing.T) {
	f := newTCP(t)
	sess := f.login(t)
	both := sessionCookie + "=junk; " + sess.String()
	if r := f.do(t, "GET", "/v1/status", nil, "Cookie", both, PageHeader, sess.page); r.code != 200 {
		t.Errorf("the page's request behind a tossed cookie: %d %s", r.code, r.body)
	}
	jsonError(t, "the tossed cookie alone", f.do(t, "GET", "/v1/status", nil, "Cookie", sessionCookie+"=junk", PageHeader, sess.page), http.StatusUnauthorized)
	if r := f.do(t, "POST", "/v1/logout", nil, "Cookie", both, PageHeader, sess.page, "Origin", f.base); r.code != http.StatusNoContent {
		t.Errorf("logout behind a tossed cookie: %d %s", r.code, r.body)
	}
}
