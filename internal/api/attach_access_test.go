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

func (stubTerminals) Screen(id string, ansi bool) (program.Screen, error) {
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
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Add(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+f.addr+"/v1/attach/web:0", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return "", resp.StatusCode
	}
	defer c.CloseNow()
	_, p, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(p), http.StatusSwitchingProtocols
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

	// A browser's session: its own page may attach, another site's may not,
	// even though the browser sends the cookie along.
	cookie := f.login(t).String()
	if first, code := f.wsDial(t, "Cookie", cookie, "Origin", f.base); code != 101 || first != "hi" {
		t.Errorf("attach from the dashboard's page: %d %q", code, first)
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "https://" + f.addr} {
		if _, code := f.wsDial(t, "Cookie", cookie, "Origin", origin); code != http.StatusForbidden {
			t.Errorf("attach from a page of %s: %d, want 403", origin, code)
		}
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/input", strings.NewReader(`{"text":"x"}`), "Cookie", cookie, "Origin", "http://evil.example"); r.code != http.StatusForbidden {
		t.Errorf("input from another site's page: %d, want 403", r.code)
	}
	if r := f.do(t, "POST", "/v1/programs/web:0/input", strings.NewReader(`{"text":"x"}`), "Cookie", cookie, "Origin", f.base); r.code != http.StatusOK {
		t.Errorf("input from the dashboard's page: %d %s", r.code, r.body)
	}
}
