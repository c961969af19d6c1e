package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/program"
)

// termFixture is the API over the fake backend of newFixture with fake
// terminals: planner:0 (an agent) and shell:0, shell:1 are tty instances,
// web:0 and web:1 are not.
type termFixture struct {
	*fixture
	tt *apitest.Terminals
}

func newTermFixture(t *testing.T) *termFixture { return newTermFixtureOn(t, "tcp") }

func newTermFixtureOn(t *testing.T, transport string) *termFixture {
	t.Helper()
	b := apitest.NewBackend(t.TempDir())
	ev := &apitest.Events{}
	seed(b)
	for k := range 2 {
		b.Put(program.Status{ID: program.InstanceID("shell", k), Program: "shell", Instance: k, State: program.StateStopped})
	}
	tt := apitest.NewTerminals(b)
	tt.AddTTY("planner:0", 80, 24)
	tt.AddTTY("shell:0", 80, 24)
	tt.AddTTY("shell:1", 80, 24)
	srv := api.New(b, ev, api.Options{Version: "1.2.3", Terminals: tt})
	api.SetTimings(srv, 50*time.Millisecond, 10*time.Millisecond)
	f := &fixture{srv: srv, b: b, ev: ev}
	if transport == "unix" {
		path := serveUnix(t, srv)
		f.url, f.hc = "http://tend", unixClient(path)
	} else {
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			srv.Close()
			ts.Close()
		})
		f.url, f.hc = ts.URL, ts.Client()
	}
	return &termFixture{fixture: f, tt: tt}
}

// wantError checks a JSON error answer: its status and a message holding
// each of the words.
func wantError(t *testing.T, what string, code int, body string, want int, words ...string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if code != want || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
		t.Errorf("%s: %d %q, want %d with a JSON error", what, code, body, want)
		return
	}
	for _, w := range words {
		if !strings.Contains(e.Error, w) {
			t.Errorf("%s: error %q does not say %q", what, e.Error, w)
		}
	}
}

func TestTerminalRoutesWithoutTerminals(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/screen/web:0", ""},
		{"POST", "/v1/programs/web:0/input", `{"text": "x"}`},
		{"GET", "/v1/attach/web:0", ""},
	} {
		code, body := f.do(t, c.method, c.path, c.body, "Connection", "Upgrade", "Upgrade", "websocket")
		wantError(t, c.method+" "+c.path, code, body, http.StatusNotImplemented, "no terminals")
	}
}

func TestScreen(t *testing.T) {
	f := newTermFixture(t)
	f.tt.Output("planner:0", []byte("\x1b]2;planning\x07\x1b[1;31mred\x1b[0m text  \r\nline two"))
	code, body := f.do(t, "GET", "/v1/screen/planner:0", "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/screen/planner:0: %d %s", code, body)
	}
	scr := decode[program.Screen](t, body)
	if scr.ID != "planner:0" || scr.Cols != 80 || scr.Rows != 24 || len(scr.Lines) != 24 || !scr.Running {
		t.Errorf("screen = %+v", scr)
	}
	if scr.Lines[0] != "> red text" || scr.Lines[1] != "line two" || scr.Cursor != (program.Cursor{X: 8, Y: 1}) || scr.Title != "planning" {
		t.Errorf("lines %q, cursor %+v, title %q", scr.Lines[:3], scr.Cursor, scr.Title)
	}
	if scr.ANSI != nil || strings.Contains(body, `"ansi"`) {
		t.Errorf("ansi without ?ansi=1: %q", body)
	}
	if scr.ChangedAt.IsZero() {
		t.Error("no changed_at")
	}

	_, body = f.do(t, "GET", "/v1/screen/planner:0?ansi=1", "")
	scr = decode[program.Screen](t, body)
	if len(scr.ANSI) != 24 || !strings.Contains(scr.ANSI[0], "\x1b[") || !strings.Contains(scr.ANSI[0], "red") {
		t.Errorf("?ansi=1: %q", scr.ANSI)
	}

	// A bare name of one instance is that instance.
	if code, body := f.do(t, "GET", "/v1/screen/planner", ""); code != 200 || decode[program.Screen](t, body).ID != "planner:0" {
		t.Errorf("GET /v1/screen/planner: %d %s", code, body)
	}

	// The last screen of a run that has ended.
	f.tt.End("planner:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	_, body = f.do(t, "GET", "/v1/screen/planner:0", "")
	if scr := decode[program.Screen](t, body); scr.Running || scr.Lines[1] != "line two" {
		t.Errorf("after the run ended: %+v", scr)
	}
}

func TestScreenHistory(t *testing.T) {
	f := newTermFixture(t)
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "\x1b[3%dmline %d\x1b[0m\r\n", i%8, i)
	}
	f.tt.Output("planner:0", []byte(b.String()))
	// 24 rows: "> line 0" ... "line 6" scrolled off the top.
	code, body := f.do(t, "GET", "/v1/screen/planner:0?history=3", "")
	if code != http.StatusOK {
		t.Fatalf("?history=3: %d %s", code, body)
	}
	scr := decode[program.Screen](t, body)
	if !slices.Equal(scr.History, []string{"line 4", "line 5", "line 6"}) || scr.Lines[0] != "line 7" || scr.HistoryANSI != nil {
		t.Errorf("?history=3: history %q, first row %q, history_ansi %q", scr.History, scr.Lines[0], scr.HistoryANSI)
	}
	_, body = f.do(t, "GET", "/v1/screen/planner:0?history=100&ansi=1", "")
	scr = decode[program.Screen](t, body)
	if len(scr.History) != 7 || scr.History[0] != "> line 0" || len(scr.HistoryANSI) != 7 || !strings.Contains(scr.HistoryANSI[1], "\x1b[31mline 1") {
		t.Errorf("?history=100&ansi=1: %q, %q", scr.History, scr.HistoryANSI)
	}
	// Asked for, it is there even when empty; not asked for, it is not.
	if _, body = f.do(t, "GET", "/v1/screen/planner:0?history=0", ""); !strings.Contains(body, `"history":[]`) {
		t.Errorf("?history=0: %s", body)
	}
	if _, body = f.do(t, "GET", "/v1/screen/planner:0", ""); strings.Contains(body, `"history"`) {
		t.Errorf("no ?history: %s", body)
	}
	for _, bad := range []string{"-1", "x", "100001"} {
		code, body := f.do(t, "GET", "/v1/screen/planner:0?history="+bad, "")
		wantError(t, "?history="+bad, code, body, http.StatusBadRequest, "history")
	}
}

func TestScreenBadInput(t *testing.T) {
	f := newTermFixture(t)
	for _, c := range []struct {
		path  string
		want  int
		words []string
	}{
		{"/v1/screen/web:0", 409, []string{"web:0 is not a terminal program (tty = false)"}},
		{"/v1/screen/nosuch:0", 404, nil},
		{"/v1/screen/nosuch", 404, nil},
		{"/v1/screen/planner:7", 404, nil},
		{"/v1/screen/BAD!", 404, nil},
		{"/v1/screen/shell", 400, []string{"shell names 2 instances", "shell:0"}},
		{"/v1/screen/all", 400, []string{"instances"}},
		{"/v1/screen/planner:0?ansi=maybe", 400, []string{"ansi"}},
	} {
		code, body := f.do(t, "GET", c.path, "")
		wantError(t, "GET "+c.path, code, body, c.want, c.words...)
	}
}

func TestInput(t *testing.T) {
	f := newTermFixture(t)
	code, body := f.do(t, "POST", "/v1/programs/planner:0/input", `{"text": "hello", "keys": ["Left", "C-c"], "enter": true}`)
	if code != 200 || body != `{"ids":["planner:0"]}`+"\n" {
		t.Fatalf("input: %d %s", code, body)
	}
	if got := string(f.tt.Typed("planner:0")); got != "hello\x1b[D\x03\r" {
		t.Errorf("typed %q", got)
	}
	if code, body := f.do(t, "POST", "/v1/programs/planner:0/input", `{"text": "ls", "enter": true}`); code != 200 {
		t.Fatalf("input: %d %s", code, body)
	}
	_, body = f.do(t, "GET", "/v1/screen/planner:0", "")
	if lines := decode[program.Screen](t, body).Lines; !slices.Contains(lines, "you said: ls") {
		t.Errorf("screen after input: %q", lines[:6])
	}

	// A bare name and all type into every running tty instance they name.
	code, body = f.do(t, "POST", "/v1/programs/shell/input", `{"keys": ["Enter"]}`)
	if code != 200 || body != `{"ids":["shell:0","shell:1"]}`+"\n" {
		t.Errorf("input to shell: %d %s", code, body)
	}
	f.tt.End("shell:1", program.StateStopped, program.LifecycleDone, "stopped by the operator", "")
	code, body = f.do(t, "POST", "/v1/programs/all/input", `{"text": "x"}`)
	if code != 200 || body != `{"ids":["planner:0","shell:0"]}`+"\n" {
		t.Errorf("input to all: %d %s", code, body)
	}
	if got := string(f.tt.Typed("shell:1")); got != "\r" {
		t.Errorf("shell:1, stopped, was typed %q", got)
	}

	// Exactly 64 KiB of text is taken.
	text := strings.Repeat("é", program.MaxInput/2)
	code, body = f.do(t, "POST", "/v1/programs/shell:0/input", `{"text": "`+text+`"}`)
	if code != 200 {
		t.Errorf("64 KiB of text: %d %s", code, body)
	}
}

func TestInputBadInput(t *testing.T) {
	f := newTermFixture(t)
	f.tt.End("shell:1", program.StateBackoff, program.LifecycleError, "backing off 2s after crash 1 of 5: exit 1 (runtime_error)", "")
	big := strings.Repeat("a", program.MaxInput+1)
	for _, c := range []struct {
		path, body string
		want       int
		words      []string
	}{
		{"web:0", `{"text": "x"}`, 409, []string{"web:0 is not a terminal program (tty = false)"}},
		{"web", `{"text": "x"}`, 409, []string{"tty = false"}},
		{"shell:1", `{"text": "x"}`, 409, []string{"shell:1 is not running", "backing off 2s"}},
		{"nosuch:0", `{"text": "x"}`, 404, nil},
		{"nosuch", `{"text": "x"}`, 404, nil},
		{"BAD!", `{"text": "x"}`, 404, nil},
		{"planner:0", `{"text": "` + big + `"}`, 413, []string{"64 KiB"}},
		{"planner:0", `{"text": "` + strings.Repeat(`\u001b`, program.MaxInput+1) + `"}`, 413, []string{"64 KiB"}},
		{"planner:0", `{"keys": ["Enter", ""]}`, 400, []string{"key 2 is empty"}},
		{"planner:0", `{"keys": ["` + strings.Repeat("k", program.MaxInput/2) + `", "` + strings.Repeat("k", program.MaxInput/2+1) + `"]}`, 413, []string{"64 KiB"}},
		{"planner:0", `{"text": "` + strings.Repeat("t", program.MaxInput/2) + `", "keys": ["` + strings.Repeat("k", program.MaxInput/2+1) + `"]}`, 413, []string{"64 KiB"}},
		{"planner:0", `{}`, 400, []string{"nothing to type"}},
		{"planner:0", ``, 400, nil},
		{"planner:0", `{"text": "x", "colour": "red"}`, 400, []string{"colour"}},
		{"planner:0", `{"text": 5}`, 400, nil},
		{"planner:0", `{"text": "x"} {"text": "y"}`, 400, []string{"one JSON object"}},
		{"planner:0", "{\"text\": \"\xff\"}", 400, []string{"UTF-8"}},
	} {
		what := fmt.Sprintf("POST %s/input %.40q", c.path, c.body)
		code, body := f.do(t, "POST", "/v1/programs/"+c.path+"/input", c.body)
		wantError(t, what, code, body, c.want, c.words...)
	}
	if typed := f.tt.Typed("planner:0"); len(typed) != 0 {
		t.Errorf("bad input typed %q", typed)
	}
}

// countingBody is an endless request body, a JSON string that never
// closes, that counts what was read of it.
type countingBody struct{ n int }

func (b *countingBody) Read(p []byte) (int, error) {
	if b.n == 0 && len(p) > 9 {
		b.n += copy(p, `{"text":"`)
		return b.n, nil
	}
	for i := range p {
		p[i] = 'a'
	}
	b.n += len(p)
	return len(p), nil
}

func (b *countingBody) Close() error { return nil }

// TestInputBodyCapped: a body too big is refused without being read to
// its end, whether or not it says its length.
func TestInputBodyCapped(t *testing.T) {
	f := newTermFixture(t)
	body := &countingBody{}
	req := httptest.NewRequest("POST", "/v1/programs/planner:0/input", body)
	req.ContentLength = -1 // chunked: the length is not known up front
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	wantError(t, "an endless body", rec.Code, rec.Body.String(), http.StatusRequestEntityTooLarge, "64 KiB")
	if body.n > 1<<20 {
		t.Errorf("read %d bytes of an endless body", body.n)
	}

	body = &countingBody{}
	req = httptest.NewRequest("POST", "/v1/programs/planner:0/input", body)
	req.ContentLength = 100 << 20
	rec = httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	wantError(t, "a body that says it is 100 MiB", rec.Code, rec.Body.String(), http.StatusRequestEntityTooLarge, "64 KiB")
	if body.n != 0 {
		t.Errorf("read %d bytes of a body announced as too big", body.n)
	}
}

func TestParseInput(t *testing.T) {
	in, err := api.ParseInput([]byte(`{"text": "a\u001bb", "keys": ["Enter", "M-x", "F12"], "enter": true}`))
	if err != nil || in.Text != "a\x1bb" || !slices.Equal(in.Keys, []string{"Enter", "M-x", "F12"}) || !in.Enter {
		t.Errorf("ParseInput = %+v, %v", in, err)
	}
	// An item that is no key name is text typed as written, as tmux's
	// send-keys types it; literal types the text as keystrokes.
	if in, err := api.ParseInput([]byte(`{"keys": [":set nu", "Enter"], "text": "x", "literal": true}`)); err != nil || !slices.Equal(in.Keys, []string{":set nu", "Enter"}) || !in.Literal {
		t.Errorf("keys as text: %+v, %v", in, err)
	}
	if _, err := api.ParseInput([]byte(`{"keys": [""]}`)); !errors.Is(err, program.ErrInvalid) {
		t.Errorf("an empty key: %v, want ErrInvalid", err)
	}
	if _, err := api.ParseInput(bytes.Repeat([]byte("x"), 10)); !errors.Is(err, program.ErrInvalid) {
		t.Errorf("not JSON: %v, want ErrInvalid", err)
	}
	keys := `{"keys": [` + strings.Repeat(`"a",`, 5000) + `"a"]}`
	if _, err := api.ParseInput([]byte(keys)); !errors.Is(err, program.ErrInvalid) {
		t.Errorf("5001 keys: %v, want ErrInvalid", err)
	}
}

// FuzzParseInput: any body is taken or refused with ErrInvalid or
// ErrTooLarge, never a panic; what is taken is within the bounds and
// reads back the same once encoded again.
func FuzzParseInput(f *testing.F) {
	for _, s := range []string{
		`{"text": "hello", "enter": true}`,
		`{"keys": ["C-c", "Up", "M-x", "F5", "S-Left", "^a", "é"]}`,
		`{"text": "\u001b[200~", "keys": []}`,
		`{"text": null, "keys": null, "enter": false}`,
		`{"text": "x"}garbage`,
		`{"keys": ["C-M-S-Up"]}`,
		`[]`, `""`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := api.ParseInput(body)
		if err != nil {
			if !errors.Is(err, program.ErrInvalid) && !errors.Is(err, program.ErrTooLarge) {
				t.Fatalf("ParseInput(%q): %v, neither ErrInvalid nor ErrTooLarge", body, err)
			}
			return
		}
		if len(in.Text) > program.MaxInput || in.Text == "" && len(in.Keys) == 0 && !in.Enter {
			t.Fatalf("ParseInput(%q) took %+v", body, in)
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := api.ParseInput(again)
		if err != nil || back.Text != in.Text || !slices.Equal(back.Keys, in.Keys) || back.Enter != in.Enter {
			t.Fatalf("ParseInput(%q) = %+v; encoded again, %s reads %+v, %v", body, in, again, back, err)
		}
	})
}

// readAll reads a response body, failing the test on error.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
