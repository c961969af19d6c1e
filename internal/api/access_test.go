package api

// The TCP access layer, over a real TCP listener. These tests sit inside
// package api (apitest imports api, so they cannot use it) to move the login
// clock; a small stub stands in for the daemon.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

const testToken = "0123456789abcdef0123456789abcdef"

// stubBackend answers List and Status with one instance and records
// restarts; other methods are not called by these tests.
type stubBackend struct {
	Backend // nil: an unexpected call panics

	mu       sync.Mutex // guards restarts
	restarts []string
}

func (b *stubBackend) List(bool, program.LabelSelector) (Statuses, func()) {
	return StatusSlice{{ID: "web:0", Program: "web", State: program.StateRunning}}, func() {}
}

func (b *stubBackend) Status(sel string, _ program.LabelSelector) ([]program.Status, error) {
	if sel != "web:0" && sel != "web" && sel != "all" {
		return nil, program.ErrNotFound
	}
	list, _ := b.List(false, nil)
	return list.(StatusSlice), nil
}

func (b *stubBackend) Restart(_ context.Context, sel string, _ program.ActOptions) (program.ActResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.restarts = append(b.restarts, sel)
	return program.ActResult{IDs: []string{"web:0"}}, nil
}

func (b *stubBackend) Readiness() program.Readiness {
	return program.Readiness{Ready: false, Instances: 1, NotReady: []string{"web:0"}}
}

func (b *stubBackend) ParseProgram([]byte) (program.Spec, error) {
	return program.Spec{}, program.ErrInvalid
}

func (b *stubBackend) Restarts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.restarts)
}

// stubEvents has no events; a subscription stays open until closed.
type stubEvents struct{}

func (stubEvents) Since(uint64, int) ([]program.Event, error) { return nil, nil }
func (stubEvents) LastSeq() uint64                            { return 0 }
func (stubEvents) Subscribe(uint64) Subscription {
	return &stubSub{c: make(chan program.Event)}
}

type stubSub struct {
	c    chan program.Event
	once sync.Once
}

func (s *stubSub) C() <-chan program.Event { return s.c }
func (s *stubSub) CutOff() bool            { return false }
func (s *stubSub) Close()                  { s.once.Do(func() { close(s.c) }) }

// tcpFixture is a Server on a real TCP port.
type tcpFixture struct {
	srv  *Server
	b    *stubBackend
	base string // http://127.0.0.1:PORT
	addr string
	hc   *http.Client // does not follow redirects
	errc chan error   // the TCP server's result
	now  time.Time    // the login clock, moved by advance; guarded by srv.login.mu
}

func newTCP(t *testing.T) *tcpFixture { return newTCPWith(t, TCPOptions{}, stubEvents{}) }

// newTCPWith serves on 127.0.0.1 with opts (the token is filled in) and
// the event log ev.
func newTCPWith(t *testing.T, opts TCPOptions, ev Events) *tcpFixture {
	t.Helper()
	f := &tcpFixture{b: &stubBackend{}, errc: make(chan error, 1), now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	f.srv = New(f.b, ev, Options{Version: "test"})
	f.srv.keepalive = 20 * time.Millisecond
	f.srv.login.now = func() time.Time { return f.now } // read under login.mu
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	f.base = "http://" + f.addr
	if opts.TLS != nil {
		f.base = "https://" + f.addr
	}
	f.hc = &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	opts.Token = testToken
	serve, err := f.srv.AttachTCP(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { f.errc <- serve() }()
	t.Cleanup(func() {
		f.srv.Close()
		if err := <-f.errc; err != nil {
			t.Errorf("serving TCP: %v", err)
		}
	})
	return f
}

func (f *tcpFixture) advance(d time.Duration) {
	f.srv.login.mu.Lock()
	f.now = f.now.Add(d)
	f.srv.login.mu.Unlock()
}

// reply is a response read whole.
type reply struct {
	code int
	hdr  http.Header
	body string
}

// do sends a request; hdr are header name/value pairs.
func (f *tcpFixture) do(t *testing.T, method, path string, body io.Reader, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, f.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// jsonError checks that r is a JSON error answer with code.
func jsonError(t *testing.T, what string, r reply, code int) {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if r.code != code || json.Unmarshal([]byte(r.body), &body) != nil || body.Error == "" {
		t.Errorf("%s: %d %q, want %d with a JSON error", what, r.code, r.body, code)
	}
}

// loginCode issues a one-time code, as POST /v1/dashboard/login does.
func (s *Server) loginCode() string {
	code, _, _ := s.login.issueCode()
	return code
}

// postCode POSTs code to /login as a browser's form does.
func (f *tcpFixture) postCode(t *testing.T, code string, hdr ...string) reply {
	t.Helper()
	form := url.Values{"code": {code}}.Encode()
	return f.do(t, "POST", "/login", strings.NewReader(form), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
}

// sessionOf returns the session cookie a reply sets, or nil.
func sessionOf(r reply) *http.Cookie {
	for _, c := range (&http.Response{Header: r.hdr}).Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}

// session is a dashboard login: the browser's cookie and the page's
// secret.
type session struct {
	*http.Cookie
	page string
}

// hdr is the headers of a request from the page that logged in, then more.
func (s session) hdr(more ...string) []string {
	return append([]string{"Cookie", s.String(), PageHeader, s.page}, more...)
}

// pageScript is how the login's answer hands the page its secret.
var pageScript = regexp.MustCompile(`<script nonce="([A-Za-z0-9_-]+)">sessionStorage\.setItem\("tend_page", "([A-Za-z0-9_-]+)"\); location\.replace\("/"\);</script>`)

// pageOf returns the page secret a login's answer gives, or "".
func pageOf(r reply) string {
	m := pageScript.FindStringSubmatch(r.body)
	if m == nil {
		return ""
	}
	return m[2]
}

// login exchanges a fresh code for a session (hdr: more headers of the
// POST, such as the cookie of an earlier login).
func (f *tcpFixture) login(t *testing.T, hdr ...string) session {
	t.Helper()
	r := f.postCode(t, f.srv.loginCode(), hdr...)
	c, page := sessionOf(r), pageOf(r)
	if r.code != http.StatusOK || c == nil || page == "" {
		t.Fatalf("login: %d %v %q, want 200 with a %s cookie and a page secret", r.code, r.hdr, r.body, sessionCookie)
	}
	return session{c, page}
}

func TestTCPToken(t *testing.T) {
	f := newTCP(t)
	jsonError(t, "no token", f.do(t, "GET", "/v1/status", nil), 401)
	jsonError(t, "wrong token", f.do(t, "GET", "/v1/status", nil, "Authorization", "Bearer "+strings.Repeat("0", len(testToken))), 401)
	jsonError(t, "a prefix of the token", f.do(t, "GET", "/v1/status", nil, "Authorization", "Bearer "+testToken[:8]), 401)
	jsonError(t, "not a bearer token", f.do(t, "GET", "/v1/status", nil, "Authorization", "Basic "+testToken), 401)
	if r := f.do(t, "GET", "/v1/status", nil); r.hdr.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
		r := f.do(t, "GET", "/v1/status", nil, "Authorization", auth)
		if r.code != 200 || !strings.Contains(r.body, `"web:0"`) {
			t.Errorf("%q: %d %s, want 200 with the list", auth, r.code, r.body)
		}
	}
	// An unknown path is refused before it is looked up.
	jsonError(t, "unknown path without token", f.do(t, "GET", "/v1/nothing", nil), 401)
	jsonError(t, "unknown path with token", f.do(t, "GET", "/v1/nothing", nil, "Authorization", "Bearer "+testToken), 404)
}

func TestTCPHealthzOpen(t *testing.T) {
	f := newTCP(t)
	r := f.do(t, "GET", "/healthz", nil)
	if r.code != 200 || !strings.Contains(r.body, `"ok":true`) {
		t.Errorf("healthz: %d %s", r.code, r.body)
	}
	if r.hdr.Get("X-Content-Type-Options") != "nosniff" || r.hdr.Get("X-Frame-Options") != "DENY" {
		t.Errorf("healthz headers: %v", r.hdr)
	}
	// Only healthz: a wrong token on it does not matter, but nothing else is open.
	if r := f.do(t, "GET", "/metrics", nil); r.code != 401 {
		t.Errorf("/metrics without token: %d, want 401", r.code)
	}
}

func TestTCPLoginCookie(t *testing.T) {
	f := newTCP(t)
	code := f.srv.loginCode()
	r := f.postCode(t, code)
	m := pageScript.FindStringSubmatch(r.body)
	if r.code != 200 || m == nil {
		t.Fatalf("login: %d %q, want 200 with a page that keeps its secret and goes on to /", r.code, r.body)
	}
	// Its script runs by its nonce alone: no other inline script would.
	if csp := r.hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'nonce-"+m[1]+"'") || strings.Contains(csp, "unsafe-inline'; script") {
		t.Errorf("login answer CSP %q, want the script's nonce", csp)
	}
	if cc := r.hdr.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("login answer Cache-Control %q, want no-store: it holds a secret", cc)
	}
	set := r.hdr.Get("Set-Cookie")
	for _, want := range []string{sessionCookie + "=", "Path=/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Set-Cookie %q is Secure on plain HTTP: the browser would drop it", set)
	}
	c := session{sessionOf(r), m[2]}
	if r := f.do(t, "GET", "/v1/status", nil, c.hdr()...); r.code != 200 {
		t.Errorf("with the session: %d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/v1/status", nil, "Cookie", sessionCookie+"=forged"); r.code != 401 {
		t.Errorf("forged cookie: %d, want 401", r.code)
	}

	// The code works once.
	r = f.postCode(t, code)
	if r.code != 401 || !strings.Contains(r.hdr.Get("Content-Type"), "text/html") || !strings.Contains(r.body, "tend dashboard") {
		t.Errorf("reused code: %d %q", r.code, r.body)
	}
	if sessionOf(r) != nil {
		t.Error("a reused code set a cookie")
	}
	// Codes are read as typed: any case, with or without the dashes.
	if c := f.postCode(t, strings.ToLower(strings.ReplaceAll(f.srv.loginCode(), "-", " "))); sessionOf(c) == nil {
		t.Errorf("a code typed in lower case with spaces: %d %q", c.code, c.body)
	}
	// A browser with a live cookie that opens the login page gets the
	// form: this tab may not hold the page's secret (a new tab does not).
	if r := f.do(t, "GET", "/login", nil, "Cookie", c.String()); r.code != 200 || !strings.Contains(r.body, `<form method="post" action="/login">`) {
		t.Errorf("GET /login with a live cookie: %d %v, want the form", r.code, r.hdr)
	}
	if r := f.postCode(t, ""); r.code != 401 {
		t.Errorf("no code: %d, want 401", r.code)
	}
}

// A code is never taken from a URL: not by GET /login?code= (the old
// login link), not from the query of a POST.
func TestTCPLoginNotByURL(t *testing.T) {
	f := newTCP(t)
	code := f.srv.loginCode()
	r := f.do(t, "GET", "/login?code="+url.QueryEscape(code), nil)
	if r.code != 200 || sessionOf(r) != nil || !strings.Contains(r.body, `<form method="post" action="/login">`) {
		t.Errorf("GET /login?code=: %d %v %q, want the login form and no session", r.code, r.hdr, r.body)
	}
	r = f.do(t, "POST", "/login?code="+url.QueryEscape(code), strings.NewReader(""), "Content-Type", "application/x-www-form-urlencoded")
	if r.code != 401 || sessionOf(r) != nil {
		t.Errorf("POST /login?code= without a body: %d %v, want 401 and no session", r.code, r.hdr)
	}
	// Neither used the code up: it still logs in by POST.
	if r := f.postCode(t, code); sessionOf(r) == nil {
		t.Errorf("the code after GET /login?code=: %d %q", r.code, r.body)
	}
}

func TestTCPLoginExpiry(t *testing.T) {
	f := newTCP(t)
	code := f.srv.loginCode()
	f.advance(codeTTL)
	if r := f.postCode(t, code); r.code != 401 {
		t.Errorf("code after %v: %d, want 401", codeTTL, r.code)
	}

	c := f.login(t)
	f.advance(sessionTTL - time.Minute)
	if r := f.do(t, "GET", "/v1/status", nil, c.hdr()...); r.code != 200 {
		t.Errorf("session near its end: %d, want 200", r.code)
	}
	f.advance(time.Minute)
	r := f.do(t, "GET", "/v1/status", nil, c.hdr()...)
	jsonError(t, "expired session", r, 401)
	if !strings.Contains(r.body, "tend dashboard") {
		t.Errorf("expired session answer %q does not say how to log in again", r.body)
	}
}

func TestTCPOriginCheck(t *testing.T) {
	f := newTCP(t)
	c := f.login(t)
	const restart = "/v1/programs/web:0/restart"
	jsonError(t, "cross-origin POST", f.do(t, "POST", restart, nil, c.hdr("Origin", "http://evil.example")...), 403)
	jsonError(t, "POST without Origin", f.do(t, "POST", restart, nil, c.hdr()...), 403)
	jsonError(t, "POST from another port", f.do(t, "POST", restart, nil, c.hdr("Origin", "http://127.0.0.1:1")...), 403)
	if got := f.b.Restarts(); len(got) != 0 {
		t.Fatalf("refused requests reached the backend: %v", got)
	}
	if r := f.do(t, "POST", restart, nil, c.hdr("Origin", f.base)...); r.code != 200 {
		t.Errorf("same-origin POST: %d %s", r.code, r.body)
	}
	// The CLI and scripts use the token and send no Origin.
	if r := f.do(t, "POST", restart, nil, "Authorization", "Bearer "+testToken); r.code != 200 {
		t.Errorf("token POST: %d %s", r.code, r.body)
	}
	// Reads need no Origin.
	if r := f.do(t, "GET", "/v1/status/web:0", nil, c.hdr()...); r.code != 200 {
		t.Errorf("cookie GET: %d %s", r.code, r.body)
	}
	if got := f.b.Restarts(); !slices.Equal(got, []string{"web:0", "web:0"}) {
		t.Errorf("restarts = %v, want two", got)
	}
}

func TestTCPBodyCap(t *testing.T) {
	f := newTCP(t)
	big := strings.Repeat("x", maxBody+1)
	jsonError(t, "oversized body", f.do(t, "POST", "/v1/programs", strings.NewReader(big), "Authorization", "Bearer "+testToken), 413)
	// Without a Content-Length (chunked) the cap still holds while reading.
	jsonError(t, "oversized chunked body", f.do(t, "POST", "/v1/programs", io.MultiReader(strings.NewReader(big)), "Authorization", "Bearer "+testToken), 413)
	jsonError(t, "small body", f.do(t, "POST", "/v1/programs", strings.NewReader("{}"), "Authorization", "Bearer "+testToken), 400)
}

func TestTCPUnauthenticatedPage(t *testing.T) {
	f := newTCP(t)
	r := f.do(t, "GET", "/", nil, "Accept", "text/html")
	if r.code != 303 || r.hdr.Get("Location") != "/login" {
		t.Errorf("GET / without login: %d %v, want 303 to /login", r.code, r.hdr)
	}
	r = f.do(t, "GET", "/login", nil, "Accept", "text/html")
	if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/html") || !strings.Contains(r.body, "tend dashboard") ||
		!strings.Contains(r.body, `<form method="post" action="/login">`) {
		t.Errorf("GET /login: %d %q %q, want the login form", r.code, r.hdr.Get("Content-Type"), r.body)
	}
	if csp := r.hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("login page CSP %q does not let its form post", csp)
	}
	// An EventSource or fetch to the API gets JSON.
	jsonError(t, "events without login", f.do(t, "GET", "/v1/events", nil, "Accept", "text/event-stream"), 401)
	jsonError(t, "status from a page's fetch", f.do(t, "GET", "/v1/status", nil, "Accept", "application/json"), 401)
}

func TestDashboardLogin(t *testing.T) {
	// Before any TCP front, the socket has no logins to give.
	srv := New(&stubBackend{}, stubEvents{}, Options{})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", dashboardLoginPath, nil))
	if rec.Code != 404 {
		t.Errorf("POST %s without TCP: %d, want 404", dashboardLoginPath, rec.Code)
	}

	f := newTCP(t)
	// Over the trusted transport (the handler the unix socket serves).
	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", dashboardLoginPath, nil))
	var got loginBody
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
		t.Fatalf("POST %s: %d %s", dashboardLoginPath, rec.Code, rec.Body.String())
	}
	if got.URL != f.base+"/" || got.LoginURL != f.base+"/login" || strings.Contains(got.URL+got.LoginURL, got.Code) {
		t.Errorf("url %q, login_url %q: want %s/ and %s/login, without the code", got.URL, got.LoginURL, f.base, f.base)
	}
	if d := got.ExpiresAt.Sub(f.now); d != codeTTL {
		t.Errorf("expires_at is %v after now, want %v", d, codeTTL)
	}
	state := func() string {
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", dashboardLoginPath+"/"+got.ID, nil))
		var st struct{ State string }
		json.Unmarshal(rec.Body.Bytes(), &st)
		return st.State
	}
	if s := state(); s != "pending" {
		t.Errorf("state before use: %q, want pending", s)
	}
	if r := f.postCode(t, got.Code); sessionOf(r) == nil {
		t.Errorf("the code: %d %q", r.code, r.body)
	}
	if s := state(); s != "used" {
		t.Errorf("state after use: %q, want used", s)
	}
	f.advance(codeTTL)
	f.srv.loginCode() // makes room: forgets expired codes
	if s := state(); s != "expired" {
		t.Errorf("state after expiry: %q, want expired", s)
	}

	// Over TCP the routes do not exist, token or not.
	jsonError(t, "login route over TCP", f.do(t, "POST", dashboardLoginPath, nil, "Authorization", "Bearer "+testToken), 404)
	jsonError(t, "login route over TCP, unclean path", f.do(t, "POST", "/v1/x/.."+dashboardLoginPath[3:], nil, "Authorization", "Bearer "+testToken), 404)
	jsonError(t, "login state over TCP", f.do(t, "GET", dashboardLoginPath+"/"+got.ID, nil, "Authorization", "Bearer "+testToken), 404)
}

// Close ends the TCP listener and its streams at once.
func TestTCPCloseEndsStreams(t *testing.T) {
	f := newTCP(t)
	req, _ := http.NewRequest("GET", f.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := f.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	closed := make(chan struct{})
	go func() {
		f.srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on an open event stream")
	}
	if _, err := io.ReadAll(resp.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("stream ended with %v", err)
	}
	if _, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		t.Error("the TCP listener still accepts after Close")
	}
}

func TestServeTCPNeedsToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := New(&stubBackend{}, stubEvents{}, Options{}).ServeTCP(l, TCPOptions{}); err == nil {
		t.Error("ServeTCP with an empty token served")
	}
}
