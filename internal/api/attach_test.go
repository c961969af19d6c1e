package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// wsClient is an attached test client: what it reads goes onto a screen of
// the terminal's size, as a terminal would show it.
type wsClient struct {
	t    *testing.T
	c    *websocket.Conn
	mu   sync.Mutex // guards scr, raw and text
	scr  *vt.Screen
	raw  strings.Builder // every byte read
	text []string        // text messages read
	err  error           // what ended the reading
	done chan struct{}
}

// dial attaches to path ("/v1/attach/planner:0?...") over the fixture's
// transport.
func (f *termFixture) dial(t *testing.T, path string, hdr ...string) (*wsClient, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(f.url, "http") + path
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: f.hc, HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	w := &wsClient{t: t, c: c, scr: vt.NewScreen(vt.Size{Cols: 80, Rows: 24}), done: make(chan struct{})}
	t.Cleanup(func() { c.CloseNow(); <-w.done })
	go w.read()
	return w, resp, nil
}

// read takes messages until the connection ends.
func (w *wsClient) read() {
	defer close(w.done)
	for {
		typ, p, err := w.c.Read(context.Background())
		if err != nil {
			w.err = err
			return
		}
		w.mu.Lock()
		if typ == websocket.MessageBinary {
			w.scr.Feed(p)
			w.raw.Write(p)
		} else {
			w.text = append(w.text, string(p))
		}
		w.mu.Unlock()
	}
}

// waitFor waits until cond holds of what the client has read.
func (w *wsClient) waitFor(what string, cond func(w *wsClient) bool) {
	w.t.Helper()
	testutil.Eventually(w.t, what, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cond(w)
	})
}

// ended waits for the connection to end and returns its close status.
func (w *wsClient) ended() (websocket.StatusCode, string) {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		w.t.Fatal("the attach did not end")
	}
	var ce websocket.CloseError
	if errors.As(w.err, &ce) {
		return ce.Code, ce.Reason
	}
	return -1, w.err.Error()
}

func (w *wsClient) send(typ websocket.MessageType, p string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, typ, []byte(p)); err != nil {
		w.t.Fatal(err)
	}
}

func TestAttach(t *testing.T) {
	for _, transport := range []string{"tcp", "unix"} {
		t.Run(transport, func(t *testing.T) {
			f := newTermFixtureOn(t, transport)
			f.tt.Output("planner:0", []byte("hello from the agent"))
			w, _, err := f.dial(t, "/v1/attach/planner:0")
			if err != nil {
				t.Fatal(err)
			}
			// The screen at once: the client's terminal shows what the
			// screen route does, before anything new is written.
			_, body := f.do(t, "GET", "/v1/screen/planner:0", "")
			want := strings.Join(decode[program.Screen](t, body).Lines, "\n") + "\n"
			w.waitFor("the screen drawn at once", func(w *wsClient) bool { return w.scr.Text() == want })
			testutil.Eventually(t, "one client attached", func() bool { return f.tt.Clients("planner:0") == 1 })

			// Keystrokes in, the program's answer out.
			w.send(websocket.MessageBinary, "ls -l\r")
			w.waitFor("the answer", func(w *wsClient) bool { return strings.Contains(w.scr.Text(), "you said: ls -l") })
			if got := string(f.tt.Typed("planner:0")); got != "ls -l\r" {
				t.Errorf("typed %q", got)
			}

			// Resizes; 0x0 leaves the size as it is; a bad one is answered
			// with a text message and the connection stays.
			w.send(websocket.MessageText, `{"cols": 100, "rows": 30}`)
			testutil.Eventually(t, "the resize", func() bool { c, r := f.tt.Size("planner:0"); return c == 100 && r == 30 })
			w.send(websocket.MessageText, `{"cols": 0, "rows": 0}`)
			w.send(websocket.MessageText, `{"cols": 5, "rows": 1}`)
			w.send(websocket.MessageText, `resize please`)
			w.waitFor("two errors", func(w *wsClient) bool { return len(w.text) == 2 })
			if c, r := f.tt.Size("planner:0"); c != 100 || r != 30 {
				t.Errorf("size %dx%d after 0x0 and 5x1, want 100x30", c, r)
			}
			for _, m := range w.text {
				var e struct{ Error string }
				if json.Unmarshal([]byte(m), &e) != nil || e.Error == "" {
					t.Errorf("text message %q is not {\"error\": ...}", m)
				}
			}
			if !strings.Contains(w.text[0], "out of range") || !strings.Contains(w.text[1], `{\"cols\": C, \"rows\": R}`) {
				t.Errorf("errors %q", w.text)
			}

			// A new run: the notice, then its screen.
			f.tt.NewRun("planner:0", "[tend] planner:0 exited: exit 1 (runtime_error), crash 1 of 5; next run in 0s")
			w.waitFor("the notice", func(w *wsClient) bool { return strings.Contains(w.raw.String(), "[tend] planner:0 exited: exit 1") })
			w.waitFor("the next run's screen", func(w *wsClient) bool { return strings.HasPrefix(w.scr.Text(), ">\n") })

			// The end, for good: closed with the lifecycle as the reason.
			f.tt.End("planner:0", program.StateFatal, program.LifecycleError, "gave up", "[tend] planner:0 gave up")
			if code, reason := w.ended(); code != websocket.StatusNormalClosure || reason != "error" {
				t.Errorf("closed with %d %q, want 1000 \"error\"", code, reason)
			}
			testutil.Eventually(t, "no client left", func() bool { return f.tt.Clients("planner:0") == 0 })
		})
	}
}

func TestAttachEndsDone(t *testing.T) {
	f := newTermFixture(t)
	w, _, err := f.dial(t, "/v1/attach/shell:0")
	if err != nil {
		t.Fatal(err)
	}
	w.waitFor("the prompt", func(w *wsClient) bool { return strings.HasPrefix(w.scr.Text(), ">") })
	f.tt.End("shell:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	if code, reason := w.ended(); code != websocket.StatusNormalClosure || reason != "done" {
		t.Errorf("closed with %d %q, want 1000 \"done\"", code, reason)
	}
}

func TestAttachReadOnly(t *testing.T) {
	f := newTermFixture(t)
	w, _, err := f.dial(t, "/v1/attach/planner?read_only=1")
	if err != nil {
		t.Fatal(err)
	}
	w.send(websocket.MessageBinary, "rm -rf /\r")
	w.send(websocket.MessageText, `{"cols": 100, "rows": 30}`)
	f.tt.Output("planner:0", []byte("still watched"))
	w.waitFor("output", func(w *wsClient) bool { return strings.Contains(w.scr.Text(), "still watched") })
	if typed := f.tt.Typed("planner:0"); len(typed) != 0 {
		t.Errorf("a read-only client typed %q", typed)
	}
	if c, r := f.tt.Size("planner:0"); c != 80 || r != 24 {
		t.Errorf("a read-only client resized to %dx%d", c, r)
	}
}

func TestAttachBadInput(t *testing.T) {
	f := newTermFixture(t)
	f.tt.End("shell:1", program.StateStopped, program.LifecycleDone, "stopped by the operator", "")
	for _, c := range []struct {
		path  string
		hdr   []string
		want  int
		words []string
	}{
		{"/v1/attach/web:0", nil, 409, []string{"web:0 is not a terminal program (tty = false)"}},
		{"/v1/attach/shell:1", nil, 409, []string{"shell:1 is not running", "stopped by the operator"}},
		{"/v1/attach/nosuch:0", nil, 404, nil},
		{"/v1/attach/shell", nil, 400, []string{"shell names 2 instances"}},
		{"/v1/attach/planner:0?read_only=perhaps", nil, 400, []string{"read_only"}},
		{"/v1/attach/planner:0", []string{"Origin", "http://evil.example"}, 403, []string{"Origin"}},
		{"/v1/attach/planner:0", []string{"Origin", "null"}, 403, []string{"Origin"}},
	} {
		_, resp, err := f.dial(t, c.path, c.hdr...)
		if err == nil || resp == nil {
			t.Errorf("attach %s %q: %v, want a refusal", c.path, c.hdr, err)
			continue
		}
		wantError(t, "attach "+c.path, resp.StatusCode, readAll(t, resp.Body), c.want, c.words...)
	}
	// The page's own origin may attach.
	if _, _, err := f.dial(t, "/v1/attach/planner:0", "Origin", f.url); err != nil {
		t.Errorf("same-origin attach: %v", err)
	}
	// Not a WebSocket: 426, in JSON.
	code, body := f.do(t, "GET", "/v1/attach/planner:0", "")
	wantError(t, "a plain GET", code, body, http.StatusUpgradeRequired, "WebSocket")
}

// TestAttachClientGoesAway: a client that stops reading and disconnects
// while the run floods its terminal costs nothing once gone: the server's
// writer, stuck in a write, ends, and so does the client's Attach.
func TestAttachClientGoesAway(t *testing.T) {
	f := newTermFixtureOn(t, "unix")
	// A raw WebSocket handshake, so the test can drop the connection under
	// the server's writes.
	conn, err := f.hc.Transport.(*http.Transport).DialContext(context.Background(), "unix", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte("GET /v1/attach/planner:0 HTTP/1.1\r\nHost: tend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 12)
	if _, err := conn.Read(head); err != nil || string(head) != "HTTP/1.1 101" {
		t.Fatalf("handshake: %q %v", head, err)
	}
	testutil.Eventually(t, "the client attached", func() bool { return f.tt.Clients("planner:0") == 1 })
	// Flood: megabytes, more than the socket holds, with the client
	// reading none of it.
	chunk := []byte(strings.Repeat("flood of output ", 4096))
	for range 64 {
		f.tt.Output("planner:0", chunk)
	}
	conn.Close()
	testutil.Eventually(t, "the client's attach to end", func() bool { return f.tt.Clients("planner:0") == 0 })
	f.tt.Output("planner:0", []byte("after"))
}

// TestAttachServerClose: closing the server ends attached clients with
// "going away".
func TestAttachServerClose(t *testing.T) {
	f := newTermFixture(t)
	w, _, err := f.dial(t, "/v1/attach/planner:0")
	if err != nil {
		t.Fatal(err)
	}
	w.waitFor("the prompt", func(w *wsClient) bool { return strings.HasPrefix(w.scr.Text(), ">") })
	f.srv.Close()
	if code, _ := w.ended(); code != websocket.StatusGoingAway {
		t.Errorf("closed with %d, want 1001 going away", code)
	}
	testutil.Eventually(t, "no client left", func() bool { return f.tt.Clients("planner:0") == 0 })
}

// TestAttachKeepsAlive: a quiet attach outlives many ping intervals.
func TestAttachKeepsAlive(t *testing.T) {
	f := newTermFixture(t) // pings every 50 ms
	w, _, err := f.dial(t, "/v1/attach/planner:0")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-w.done:
		t.Fatalf("the attach ended: %v", w.err)
	default:
	}
	f.tt.Output("planner:0", []byte("still here"))
	w.waitFor("output", func(w *wsClient) bool { return strings.Contains(w.scr.Text(), "still here") })
}
