package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// The table view is the one answer that is not JSON: the ps table as text,
// cut to the width asked for.
func TestTableView(t *testing.T) {
	f := newFixtureOn(t, "unix")
	resp, err := f.hc.Get(f.url + "/v1/status?view=table&width=80")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("%d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "ID ") || !strings.HasSuffix(lines[0], "  WHY") || len(lines) != 4 {
		t.Fatalf("table:\n%s", b)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line of %d runes at width=80: %q", n, l)
		}
	}
}

func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		code         int
		want         string // the JSON answer, compared as values; "" = not checked
		contains     string // a substring of the answer
	}{
		{name: "health", method: "GET", path: "/healthz", code: 200, want: `{"ok":true,"version":"1.2.3"}`},
		{name: "list", method: "GET", path: "/v1/status", code: 200, contains: `"id":"web:1"`},
		{name: "list bad agents", method: "GET", path: "/v1/status?agents=maybe", code: 400, contains: `agents=`},
		{name: "list full", method: "GET", path: "/v1/status?view=full", code: 200, contains: `"why":`},
		{name: "list table width 0", method: "GET", path: "/v1/status?view=table&width=0", code: 400, contains: `width=0: want 1 to 10000`},
		{name: "list table width not a number", method: "GET", path: "/v1/status?view=table&width=wide", code: 400, contains: `width=`},
		{name: "list bad view", method: "GET", path: "/v1/status?view=tiny", code: 400, contains: `view=`},
		{name: "status", method: "GET", path: "/v1/status/web:0", code: 200, contains: `"id":"web:0"`},
		{name: "status unknown", method: "GET", path: "/v1/status/nope:0", code: 404, contains: `"lifecycle":"unknown"`},
		{name: "status bare name", method: "GET", path: "/v1/status/web", code: 200, contains: `[{"id":"web:0"`},
		{name: "status unknown name", method: "GET", path: "/v1/status/nope", code: 404, contains: `"lifecycle":"unknown"`},
		{name: "status all", method: "GET", path: "/v1/status/all", code: 200, contains: `"id":"web:1"`},
		{name: "status malformed", method: "GET", path: "/v1/status/BAD%20ID", code: 404, contains: `"lifecycle":"unknown"`},
		{name: "status negative", method: "GET", path: "/v1/status/web:-1", code: 404, contains: `"lifecycle":"unknown"`},
		{name: "add", method: "POST", path: "/v1/programs", body: `{"name":"jobs","command":["sleep","9"],"instances":2}`,
			code: 201, want: `{"name":"jobs","ids":["jobs:0","jobs:1"]}`},
		{name: "add zero instances", method: "POST", path: "/v1/programs", body: `{"name":"none","command":["x"],"instances":0}`,
			code: 201, want: `{"name":"none","ids":[]}`},
		{name: "add exists", method: "POST", path: "/v1/programs", body: `{"name":"web","command":["x"]}`, code: 409, contains: "already exists"},
		{name: "add invalid", method: "POST", path: "/v1/programs", body: `{"name":"Bad Name","command":["x"]}`, code: 400, contains: "name"},
		{name: "add not json", method: "POST", path: "/v1/programs", body: `{`, code: 400},
		{name: "add unknown key", method: "POST", path: "/v1/programs", body: `{"name":"x","command":["x"],"colour":1}`, code: 400, contains: "colour"},
		{name: "remove", method: "DELETE", path: "/v1/programs/web", code: 200, want: `{"removed":"web"}`},
		{name: "remove unknown", method: "DELETE", path: "/v1/programs/nope", code: 404},
		{name: "remove malformed", method: "DELETE", path: "/v1/programs/Nope!", code: 404},
		{name: "start", method: "POST", path: "/v1/programs/web/start", code: 200, want: `{"ids":["web:0","web:1"]}`},
		{name: "start one", method: "POST", path: "/v1/programs/web:1/start", code: 200, want: `{"ids":["web:1"]}`},
		{name: "stop all", method: "POST", path: "/v1/programs/all/stop", code: 200, want: `{"ids":["planner:0","web:0","web:1"]}`},
		{name: "restart", method: "POST", path: "/v1/programs/planner:0/restart", code: 200, want: `{"ids":["planner:0"]}`},
		{name: "start unknown", method: "POST", path: "/v1/programs/nope/start", code: 404},
		{name: "stop unknown instance", method: "POST", path: "/v1/programs/web:7/stop", code: 404},
		{name: "restart malformed", method: "POST", path: "/v1/programs/web:x/restart", code: 404, contains: "bad id"},
		{name: "reload", method: "POST", path: "/v1/reload", code: 200,
			want: `{"added":["new"],"removed":[],"changed":[],"unchanged":["web"]}`},
		{name: "shutdown", method: "POST", path: "/v1/shutdown", code: 202, want: `{"ok":true}`},
		{name: "unknown path", method: "GET", path: "/v2/nothing", code: 404, contains: `"error":"no such API path: /v2/nothing"`},
		{name: "unknown action", method: "POST", path: "/v1/programs/web/explode", code: 404, contains: `"error"`},
		{name: "wrong method", method: "GET", path: "/v1/reload", code: 405, contains: `"error":"GET is not allowed on /v1/reload"`},
		{name: "wrong method on id", method: "PUT", path: "/v1/status/web:0", code: 405, contains: `"error"`},
		{name: "get programs", method: "GET", path: "/v1/programs", code: 405, contains: `"error"`},
	} {
		for _, transport := range []string{"tcp", "unix"} {
			t.Run(transport+"/"+tc.name, func(t *testing.T) {
				f := newFixtureOn(t, transport)
				f.b.ReloadResult = api.ReloadResult{Added: []string{"new"}, Unchanged: []string{"web"}}
				code, body := f.do(t, tc.method, tc.path, tc.body)
				if code != tc.code {
					t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, code, body, tc.code)
				}
				m := decode[any](t, body) // every answer is JSON
				if errBody, ok := m.(map[string]any); ok && code >= 400 && errBody["error"] == "" {
					t.Errorf("error answer without an error message: %s", body)
				}
				if tc.want != "" && !reflect.DeepEqual(m, decode[any](t, tc.want)) {
					t.Errorf("body = %s, want %s", body, tc.want)
				}
				if !strings.Contains(body, tc.contains) {
					t.Errorf("body = %s, want it to contain %s", body, tc.contains)
				}
			})
		}
	}
}

func TestListAgentsAndShape(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "GET", "/v1/status?agents=1", "")
	list := decode[[]program.Status](t, body)
	if len(list) != 1 || list[0].ID != "planner:0" {
		t.Errorf("agents = %+v, want planner:0 alone", list)
	}
	_, body = f.do(t, "GET", "/v1/status", "")
	var ids []string
	for _, st := range decode[[]program.Status](t, body) {
		ids = append(ids, st.ID)
	}
	if want := []string{"planner:0", "web:0", "web:1"}; !slices.Equal(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}

	// An empty list is [], not null.
	empty := api.New(apitest.NewBackend(t.TempDir()), &apitest.Events{}, api.Options{})
	rec := newRecorder()
	empty.Handler().ServeHTTP(rec, mustRequest(t, "GET", "/v1/status"))
	if got := strings.TrimSpace(rec.Body.String()); got != "[]" {
		t.Errorf("empty list = %q, want []", got)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestAddAndRemoveReachTheBackend(t *testing.T) {
	f := newFixture(t)
	if code, body := f.do(t, "POST", "/v1/programs", `{"name":"jobs","command":["true"]}`); code != 201 {
		t.Fatalf("add = %d %s", code, body)
	}
	if code, _ := f.do(t, "GET", "/v1/status/jobs:0", ""); code != 200 {
		t.Errorf("status of added instance = %d", code)
	}
	if code, _ := f.do(t, "DELETE", "/v1/programs/jobs", ""); code != 200 {
		t.Errorf("remove = %d", code)
	}
	if code, _ := f.do(t, "GET", "/v1/status/jobs:0", ""); code != 404 {
		t.Errorf("status of removed instance = %d, want 404", code)
	}
}

func TestShutdownAnswersThenCallsBackend(t *testing.T) {
	f := newFixture(t)
	called := make(chan struct{})
	f.b.OnShutdown = func() { close(called) }
	if code, _ := f.do(t, "POST", "/v1/shutdown", ""); code != http.StatusAccepted {
		t.Fatalf("shutdown = %d", code)
	}
	<-called
	if calls := f.b.Calls(); !slices.Contains(calls, "shutdown") {
		t.Errorf("calls = %v", calls)
	}
}

func TestBodyCap(t *testing.T) {
	f := newFixture(t)
	big := `{"name":"big","command":["x"],"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	code, body := f.do(t, "POST", "/v1/programs", big)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("1 MiB+ body = %d %s, want 413", code, body)
	}
	if e := decode[map[string]string](t, body)["error"]; !strings.Contains(e, "1 MiB") {
		t.Errorf("error = %q", e)
	}
}

// errBackend fails every operator action with err.
type errBackend struct {
	*apitest.Backend
	err error
}

func (b errBackend) Start(context.Context, string, program.ActOptions) (program.ActResult, error) {
	return program.ActResult{}, b.err
}
func (b errBackend) Stop(context.Context, string, program.ActOptions) (program.ActResult, error) {
	return program.ActResult{}, b.err
}
func (b errBackend) Reload() (api.ReloadResult, error)                           { return api.ReloadResult{}, b.err }
func (b errBackend) ParseProgram([]byte) (program.Spec, error)                   { return program.Spec{}, b.err }
func (b errBackend) Remove(context.Context, string, program.RemoveOptions) error { return b.err }
func (b errBackend) LogSources(string, program.LabelSelector) ([]logfile.Source, error) {
	return nil, b.err
}
func (b errBackend) Add(program.Spec, []byte) ([]string, error) { return nil, b.err }
func (b errBackend) Status(string, program.LabelSelector) ([]program.Status, error) {
	return nil, b.err
}
func (b errBackend) Restart(context.Context, string, program.ActOptions) (program.ActResult, error) {
	return program.ActResult{}, b.err
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("web: %w", program.ErrNotFound), 404},
		{fmt.Errorf("web: %w", program.ErrExists), 409},
		{fmt.Errorf("x: %w", program.ErrInvalid), 400},
		{fmt.Errorf("tend.toml:3: instances: must be >= 1: %w", program.ErrBadConfig), 400},
		{fmt.Errorf("busy: %w", program.ErrStopping), 503},
		{errors.New("disk on fire"), 500},
	} {
		b := errBackend{apitest.NewBackend(t.TempDir()), tc.err}
		h := api.New(b, &apitest.Events{}, api.Options{}).Handler()
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/programs/web/start"},
			{"POST", "/v1/programs/web/stop"},
			{"POST", "/v1/programs/web/restart"},
			{"POST", "/v1/reload"},
			{"GET", "/v1/status/web:0"},
			{"DELETE", "/v1/programs/web"},
			{"GET", "/v1/logs/web:0"},
		} {
			rec := newRecorder()
			h.ServeHTTP(rec, mustRequest(t, req.method, req.path))
			if rec.Code != tc.code {
				t.Errorf("%v: %s %s = %d, want %d", tc.err, req.method, req.path, rec.Code, tc.code)
			}
			body := decode[map[string]string](t, rec.Body.String())
			if body["error"] != tc.err.Error() {
				t.Errorf("%s %s: error = %q, want %q", req.method, req.path, body["error"], tc.err)
			}
			wantLifecycle := ""
			if tc.code == 404 && strings.HasPrefix(req.path, "/v1/status/") {
				wantLifecycle = "unknown"
			}
			if body["lifecycle"] != wantLifecycle {
				t.Errorf("%s %s: lifecycle = %q, want %q", req.method, req.path, body["lifecycle"], wantLifecycle)
			}
		}
	}
	// ParseProgram's errors are the client's fault even without a sentinel.
	b := errBackend{apitest.NewBackend(t.TempDir()), errors.New("json: bad")}
	rec := newRecorder()
	api.New(b, &apitest.Events{}, api.Options{}).Handler().ServeHTTP(rec, mustRequest(t, "POST", "/v1/programs"))
	if rec.Code != 400 {
		t.Errorf("parse error = %d, want 400", rec.Code)
	}
}
