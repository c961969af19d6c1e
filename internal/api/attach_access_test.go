package api

// The terminal routes behind the TCP access guard: the same credentials as
// every route, and for the WebSocket the Origin of the dashboard only.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/program"
)

// stubTerminals has one terminal, web:0, whose screen says "hi".
type stubTerminals struct{}

func (stubTerminals) Screen(id string, ansi bool, history int) (program.Screen, error) {
	return program.Screen{ID: id, Cols: 10, Rows: 2, Lines: []string{"hi", ""}, Running: true}, nil
}

func (stubTerminals) Input(sel string, in program.Input) ([]string, error) {
	return []string{"web:0"}, nil
}

func (stubTerminals) Attach(id string, readOnly bool) (program.Attach, error) {
	return &stubAttach{sent: make(chan struct{}, 1)}, nil
}

// stubAttach sends "hi" once, then waits.
type stubAttach struct{ sent chan struct{} }

func (a *stubAttach) Next(ctx context.Context) ([]byte, error) {
	select {
	case a.sent <- struct{}{}:
		return []byte("hi"), nil
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (a *stubAttach) Write([]byte) error    { return nil }
func (a *stubAttach) Resize(int, int) error { return nil }
func (a *stubAttach) End() string           { return "" }
func (a *stubAttach) Close()                {}

// wsDial attaches over the fixture's TCP port with hdr (name, value pairs)
// and returns the first message, or the refusal's status.
func (f *tcpFixture) wsDial(t *testing.T, hdr ...string) (first string, status int) {
	t.Helper()
	first, status, _ = f.wsDialPage(t, "", hdr...)
	return first, status
}

// wsDialPage is wsDial that first sends proof (unless ""), as the
// dashboard's page does, and also returns the close status when the
// server closed the connection instead of sending a message.
func (f *tcpFixture) wsDialPage(t *testing.T, proof string, hdr ...string) (first string, status int, closed websocket.StatusCode) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Add(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+f.addr+"/v1/attach/web:0", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return "", resp.StatusCode, -1
	}
	defer c.CloseNow()
	if proof != "" {
		if err := c.Write(ctx, websocket.MessageText, []byte(proof)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	_, p, err := c.Read(ctx)
	if code := websocket.CloseStatus(err); code != -1 {
		return "", http.StatusSwitchingProtocols, code
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(p), http.StatusSwitchingProtocols, -1
}

func TestTCPTerminalAccess(t *testing.T) {
	f := newTCP(t)
	// Set before any request reaches the server (the socket orders them).
	f.srv.opts.Terminals = stubTerminals{}
	if r := f.do(t, "GET", "/v1/screen/web:0", nil); r.code != http.StatusUnauthorized {
		t.Errorf("screen without a token: %d", r.code)
	}
	if r := f.do(t, "GET", "/v1/screen/web:0", nil, "Authorization", "Bearer "+testToken); r.code != http.StatusOK || !strings.Contains(r.body, `"hi"`) {
		t.Errorf("screen with the token: %d %s", r.code, r.body)
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/input", strings.NewReader(`{"text":"x"}`)); r.code != http.StatusUnauthorized {
		t.Errorf("input without a token: %d", r.code)
	}

	if _, code := f.wsDial(t); code != http.StatusUnauthorized {
		t.Errorf("attach without a token: %d, want 401", code)
	}
	if _, code := f.wsDial(t, "Authorization", "Bearer nope"); code != http.StatusUnauthorized {
		t.Errorf("attach with a wrong token: %d, want 401", code)
	}
	if first, code := f.wsDial(t, "Authorization", "Bearer "+testToken); code != 101 || first != "hi" {
		t.Errorf("attach with the token: %d %q", code, first)
	}

	// A browser's session: its own page may attach, proving itself in the
	// first message; another site's page may not, even though the browser
	// sends the cookie along.
	sess := f.login(t)
	cookie := sess.String()
	proof := `{"page": "` + sess.page + `"}`
	if first, code, closed := f.wsDialPage(t, proof, "Cookie", cookie, "Origin", f.base); code != 101 || first != "hi" {
		t.Errorf("attach from the dashboard's page: %d %q (closed %d)", code, first, closed)
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "https://" + f.addr} {
		if _, code := f.wsDial(t, "Cookie", cookie, "Origin", origin); code != http.StatusForbidden {
			t.Errorf("attach from a page of %s: %d, want 403", origin, code)
		}
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/input", strings.NewReader(`{"text":"x"}`), sess.hdr("Origin", "http://evil.example")...); r.code != http.StatusForbidden {
		t.Errorf("input from another site's page: %d, want 403", r.code)
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/input", strings.NewReader(`{"text":"x"}`), sess.hdr("Origin", f.base)...); r.code != http.StatusOK {
		t.Errorf("input from the dashboard's page: %d %s", r.code, r.body)
	}
}

// The cookie alone, as another port's server on the same host receives it
// from the browser, attaches to nothing: without the page's secret as its
// first message the connection is closed (4401) before any byte of the
// terminal is sent, whatever Origin it claims.
func TestTCPAttachNeedsPage(t *testing.T) {
	f := newTCP(t)
	f.srv.opts.Terminals = stubTerminals{}
	sess := f.login(t)
	other := f.login(t, "Cookie", sess.String()) // a second tab of the same browser
	if other.Value != sess.Value {
		t.Errorf("a second login of a browser with a live cookie gave a new cookie: its first tab would be logged out")
	}
	for what, proof := range map[string]string{
		"keystrokes first":     "ls\r",
		"no page":              `{"cols": 80, "rows": 24}`,
		"a wrong page":         `{"page": "` + strings.Repeat("A", 43) + `"}`,
		"the cookie as page":   `{"page": "` + sess.Value + `"}`,
		"another login's page": `{"page": "` + f.login(t).page + `"}`,
	} {
		first, code, closed := f.wsDialPage(t, proof, "Cookie", sess.String(), "Origin", f.base)
		if code != 101 || closed != closeUnauthorized || first != "" {
			t.Errorf("%s: %d %q closed %d, want closed %d before any output", what, code, first, closed, closeUnauthorized)
		}
	}
	// The second tab's own page works with the shared cookie.
	if first, code, closed := f.wsDialPage(t, `{"page": "`+other.page+`"}`, "Cookie", sess.String(), "Origin", f.base); first != "hi" {
		t.Errorf("the second tab: %d %q closed %d", code, first, closed)
	}
}
