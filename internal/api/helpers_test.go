package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// fixture is an API server over a fake backend and event log.
type fixture struct {
	srv *api.Server
	b   *apitest.Backend
	ev  *apitest.Events
	url string // base URL
	hc  *http.Client
}

// newFixture serves the API over httptest with two programs: web (2
// instances) and planner (an agent).
func newFixture(t *testing.T) *fixture { return newFixtureOn(t, "tcp") }

// newFixtureOn is newFixture over "tcp" (httptest) or "unix" (a socket).
func newFixtureOn(t *testing.T, transport string) *fixture {
	t.Helper()
	b := apitest.NewBackend(t.TempDir())
	ev := &apitest.Events{}
	seed(b)
	srv := api.New(b, ev, api.Options{Version: "1.2.3"})
	api.SetTimings(srv, 50*time.Millisecond, 10*time.Millisecond)
	if transport == "unix" {
		path := serveUnix(t, srv)
		return &fixture{srv: srv, b: b, ev: ev, url: "http://tend", hc: unixClient(path)}
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &fixture{srv: srv, b: b, ev: ev, url: ts.URL, hc: ts.Client()}
}

func seed(b *apitest.Backend) {
	pid := 4242
	for k := range 2 {
		id := program.InstanceID("web", k)
		b.Put(program.Status{ID: id, Program: "web", Instance: k, State: program.StateRunning,
			Lifecycle: program.LifecycleRunning, PID: &pid, Tracking: program.TrackingGroup})
	}
	b.Put(program.Status{ID: "planner:0", Program: "planner", Agent: true, State: program.StateRunning,
		Lifecycle: program.LifecycleIdle, PID: &pid, Tracking: program.TrackingGroup})
}

// unixClient returns an http.Client that dials the socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// socketDir returns a short temporary directory: a socket path must fit in
// 108 bytes, which t.TempDir's long names can pass.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tendapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveUnix serves srv on a socket in a fresh directory and returns its
// path; the server is closed at the end of the test.
func serveUnix(t *testing.T, srv *api.Server) string {
	t.Helper()
	path := filepath.Join(socketDir(t), "tend.sock")
	serveUnix2(t, srv, path)
	return path
}

// do sends a request and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
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
	return resp.StatusCode, string(b)
}

// decode unmarshals a JSON body, failing the test if it is not JSON.
func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return v
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	return httptest.NewRequest(method, path, strings.NewReader("{}"))
}

// makeStaleSocket leaves a socket file at path that nothing listens on, as
// a daemon killed outright does.
func makeStaleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := unixClient(path).Get("http://tend/healthz"); err == nil {
		t.Fatal("stale socket answers")
	}
}

// serveUnix2 is serveUnix at a given path.
func serveUnix2(t *testing.T, srv *api.Server, path string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeUnix(path) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-errc; err != nil {
			t.Errorf("ServeUnix: %v", err)
		}
	})
	testutil.Eventually(t, "socket to answer", func() bool {
		resp, err := unixClient(path).Get("http://tend/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}
