package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
)

// configBackend is the fake backend with the daemon's real body parser, so
// the fuzzer drives every key of docs/config.md through the add handler.
type configBackend struct{ *apitest.Backend }

func (b configBackend) ParseProgram(body []byte) (program.Spec, error) {
	return config.ParseProgramJSON(body, "/fuzz")
}

// fuzzServer is a fresh server over the seeded fake (web:0, web:1,
// planner:0, a terminal) with logs in logDir and events in ev.
func fuzzServer(logDir string, ev *apitest.Events) http.Handler {
	b := apitest.NewBackend(logDir)
	seed(b)
	tt := apitest.NewTerminals(b)
	tt.AddTTY("planner:0", 80, 24)
	return api.New(configBackend{b}, ev, api.Options{Terminals: tt}).Handler()
}

// serve runs one request through h with an already cancelled context, so a
// streaming answer (SSE, log follow) ends as soon as it has begun.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	ctx, cancel := context.WithCancel(req.Context())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	return rec
}

// checkAnswer asserts what every answer keeps: no 5xx, a redirect only to a
// clean absolute path, and an error as a JSON object with a message.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	code, body := rec.Code, rec.Body.Bytes()
	switch {
	case code >= 500 || code < 200:
		t.Fatalf("%s = %d %q", what, code, body)
	case code >= 300 && code < 400:
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/") || strings.Contains(loc, "/../") {
			t.Fatalf("%s = %d to %q", what, code, loc)
		}
	case code >= 400:
		var e struct{ Error string }
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s = %d with Content-Type %q: %q", what, code, ct, body)
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || !utf8.Valid(body) {
			t.Fatalf("%s = %d with a bad error body %q (%v)", what, code, body, err)
		}
	}
}

func FuzzAddBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"jobs","command":["sleep","9"],"instances":2}`,
		`{"name":"web","command":["x"]}`,
		`{"name":"sh","shell":"echo hi","agent":true,"restart":"never","stop_grace":"1s","max_rss":"1GiB"}`,
		`{"name":"p","command":["x"],"probe":{"http":"http://127.0.0.1/"},"logs":{"max_size":4096},"env":{"A":"1"}}`,
		"{\"name\":\"a\",\"command\":[\"\xff\"]}",
		`{"name":"a\u0000","command":["x"]}`,
		`{"name":"x","command":["x"],"instances":1e400}`,
		`{"name":"x","command":["x"],"instances":-1}`,
		`{"name":"x","command":["x"],"instances":99999999999999999999}`,
		`{"name":"x","command":["x"]} {}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	ev := &apitest.Events{}
	logDir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		h := fuzzServer(logDir, ev)
		rec := serve(h, httptest.NewRequest("POST", "/v1/programs", bytes.NewReader(body)))
		checkAnswer(t, "POST /v1/programs", rec)
		switch rec.Code {
		case http.StatusCreated:
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			return
		default:
			t.Fatalf("POST /v1/programs = %d %s", rec.Code, rec.Body)
		}
		if !utf8.Valid(body) {
			t.Fatalf("a body that is not UTF-8 was accepted: %q", body)
		}
		spec, err := config.ParseProgramJSON(body, "/fuzz")
		if err != nil {
			t.Fatalf("201 for a body the parser rejects: %v", err)
		}
		var ans struct{ IDs []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || len(ans.IDs) != spec.Instances {
			t.Fatalf("201 answer %s for %d instances (%v)", rec.Body, spec.Instances, err)
		}
	})
}

// pathCase is one request FuzzPaths builds from its input.
type pathCase struct {
	method, target string
	accept         string
	body           string
	textOK         bool // a 200 may be plain text or SSE rather than JSON
}

func FuzzPaths(f *testing.F) {
	f.Add("web:0", "10", "0", "exited,started", "web")
	f.Add("all", "99999999999", "18446744073709551615", "", "all")
	f.Add("../x", "-1", "-1", ",,,", "../x")
	f.Add("..%2F..%2Fetc%2Fpasswd", "1e3", "18446744073709551616", "x", "web:-1")
	f.Add("%2e%2e", " 5", "+1", "\xff", "\xff")
	f.Add("web:0/../../v1/shutdown", "0", "", "a\x00b", "web:0\n")
	f.Add("web\x00:0", "", "00001", "exited", "planner:0")
	f.Add("planner:0?x=1#frag", "9223372036854775808", "1", "%zz", "%2e")
	ev := &apitest.Events{}
	for k := range 5 {
		ev.Publish("started", program.InstanceID("web", k%2), map[string]int{"run": k})
	}
	logDir := f.TempDir()
	log := strings.Repeat("line\n", 1000)
	if err := os.WriteFile(filepath.Join(logDir, "web:0.log"), []byte(log), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, tail, since, kinds, evID string) {
		seg := url.PathEscape(id)
		q := url.Values{"tail": {tail}, "follow": {"1"}}.Encode()
		eq := url.Values{"since": {since}, "kinds": {kinds}, "id": {evID}}.Encode()
		cases := []pathCase{
			{method: "GET", target: "/v1/status/" + seg},
			{method: "POST", target: "/v1/programs/" + seg + "/restart"},
			{method: "DELETE", target: "/v1/programs/" + seg},
			{method: "GET", target: "/v1/logs/" + seg + "?" + q, textOK: true},
			{method: "GET", target: "/v1/events?" + eq, accept: "application/json"},
			{method: "GET", target: "/v1/events?" + eq, accept: "text/event-stream", textOK: true},
			{method: "GET", target: "/v1/screen/" + seg + "?" + url.Values{"ansi": {tail}}.Encode()},
			{method: "POST", target: "/v1/programs/" + seg + "/input", body: `{"text": "x"}`},
			{method: "GET", target: "/v1/attach/" + seg},
			// The same strings unescaped: whatever the URL parser and the
			// mux make of them.
			{method: "GET", target: "/v1/status/" + id},
			{method: "POST", target: "/v1/programs/" + id + "/stop"},
			{method: "GET", target: "/v1/logs/" + id + "?tail=" + tail, textOK: true},
			{method: "GET", target: "/v1/events?since=" + since + "&kinds=" + kinds + "&id=" + evID, accept: "application/json"},
		}
		for _, c := range cases {
			req, err := http.NewRequest(c.method, "http://tend"+c.target, strings.NewReader(c.body))
			if err != nil {
				continue // no client can send it
			}
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			what := c.method + " " + c.target
			rec := serve(fuzzServer(logDir, ev), req)
			checkAnswer(t, what, rec)
			if rec.Code != http.StatusOK {
				continue
			}
			ct := rec.Header().Get("Content-Type")
			switch {
			case ct == "application/json":
				if !json.Valid(rec.Body.Bytes()) {
					t.Fatalf("%s = 200 with bad JSON %q", what, rec.Body)
				}
			case !c.textOK:
				t.Fatalf("%s = 200 with Content-Type %q", what, ct)
			case strings.HasPrefix(ct, "text/plain") && !strings.HasSuffix(log, unprefixed(rec.Body.String())):
				t.Fatalf("%s = 200 with %d bytes that are not the log's tail", what, rec.Body.Len())
			}
		}
	})
}

// unprefixed drops the "NAME:K | " a log answer puts before each line when
// it merges several instances.
func unprefixed(body string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		if id, rest, ok := strings.Cut(line, " | "); ok {
			if _, _, isID := program.SplitID(id); isID {
				line = rest
			}
		}
		b.WriteString(line)
	}
	return b.String()
}
