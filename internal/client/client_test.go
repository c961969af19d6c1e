package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// daemon is an api.Server over fake state on a socket in a short temp dir.
type daemon struct {
	srv  *api.Server
	b    *apitest.Backend
	ev   *apitest.Events
	tt   *apitest.Terminals // no terminals until a test adds some
	path string
	done chan struct{} // closed when the current server's ServeUnix returns
}

func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tendcl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "tend.sock")
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	d := &daemon{b: apitest.NewBackend(t.TempDir()), ev: &apitest.Events{}, path: socketPath(t)}
	d.tt = apitest.NewTerminals(d.b)
	pid := 10
	d.b.Put(program.Status{ID: "web:0", Program: "web", State: program.StateRunning, Lifecycle: program.LifecycleRunning, PID: &pid})
	d.b.Put(program.Status{ID: "planner:0", Program: "planner", Agent: true, State: program.StateRunning, Lifecycle: program.LifecycleIdle, PID: &pid})
	d.serve(t)
	return d
}

// serve (re)starts the API server on d.path over d's state.
func (d *daemon) serve(t *testing.T) {
	t.Helper()
	d.srv = api.New(d.b, d.ev, api.Options{Version: "test", Terminals: d.tt})
	done := make(chan struct{})
	srv := d.srv
	d.done = done
	go func() {
		if err := srv.ServeUnix(d.path); err != nil {
			t.Errorf("ServeUnix: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	c := client.New(d.path)
	testutil.Eventually(t, "daemon", func() bool { _, err := c.Health(); return err == nil })
}

func (d *daemon) stop() {
	d.srv.Close()
	<-d.done
}

func TestNoDaemon(t *testing.T) {
	missing := socketPath(t)
	_, err := client.New(missing).Health()
	if !errors.Is(err, client.ErrNoDaemon) {
		t.Fatalf("missing socket: %v, want ErrNoDaemon", err)
	}
	if msg := err.Error(); !strings.Contains(msg, missing) || strings.Count(msg, missing) != 1 || strings.Contains(msg, "\n") {
		t.Errorf("message %q should name the socket once, on one line", msg)
	}

	// A socket file nobody listens on: connection refused.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: missing, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	c := client.New(missing)
	for name, call := range map[string]func() error{
		"List":    func() error { _, err := c.List(false); return err },
		"Stop":    func() error { _, err := c.Stop("all"); return err },
		"Logs":    func() error { return c.Logs(t.Context(), "web:0", client.LogOptions{Tail: 10}, &bytes.Buffer{}) },
		"Events":  func() error { _, err := c.Events(0); return err },
		"Follow":  func() error { return c.Follow(t.Context(), 0, nil, "", func(program.Event) error { return nil }) },
		"Reload":  func() error { _, err := c.Reload(); return err },
		"Health":  func() error { _, err := c.Health(); return err },
		"Remove":  func() error { return c.Remove("web", program.RemoveOptions{}) },
		"Add":     func() error { _, err := c.Add(map[string]any{"name": "x"}); return err },
		"Shutdn":  c.Shutdown,
		"Status":  func() error { _, err := c.Status("web:0"); return err },
		"Start":   func() error { _, err := c.Start("all"); return err },
		"Restart": func() error { _, err := c.Restart("all"); return err },
	} {
		if err := call(); !errors.Is(err, client.ErrNoDaemon) {
			t.Errorf("%s on a refused socket: %v, want ErrNoDaemon", name, err)
		}
	}
}

func TestCalls(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	if c.Socket() != d.path {
		t.Errorf("Socket() = %q", c.Socket())
	}
	if v, err := c.Health(); err != nil || v != "test" {
		t.Errorf("Health = %q, %v", v, err)
	}
	list, err := c.List(false)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v", list, err)
	}
	if agents, err := c.List(true); err != nil || len(agents) != 1 || agents[0].ID != "planner:0" {
		t.Errorf("List(agents) = %v, %v", agents, err)
	}
	st, err := c.Status("web:0")
	if err != nil || st.ID != "web:0" || st.PID == nil || *st.PID != 10 {
		t.Errorf("Status = %+v, %v", st, err)
	}

	ids, err := c.Add(map[string]any{"name": "jobs", "command": []string{"true"}, "instances": 2})
	if err != nil || !slices.Equal(ids, []string{"jobs:0", "jobs:1"}) {
		t.Errorf("Add = %v, %v", ids, err)
	}
	for verb, call := range map[string]func(string) ([]string, error){"start": c.Start, "stop": c.Stop, "restart": c.Restart} {
		ids, err := call("jobs")
		if err != nil || !slices.Equal(ids, []string{"jobs:0", "jobs:1"}) {
			t.Errorf("%s = %v, %v", verb, ids, err)
		}
	}
	if err := c.Remove("jobs", program.RemoveOptions{}); err != nil {
		t.Errorf("Remove = %v", err)
	}
	want := []string{"start jobs", "stop jobs", "restart jobs", "remove jobs"}
	if calls := d.b.Calls(); !sameSet(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}

	d.b.ReloadResult = api.ReloadResult{Added: []string{"a"}, Changed: []string{"b"}}
	res, err := c.Reload()
	if err != nil || !slices.Equal(res.Added, []string{"a"}) || !slices.Equal(res.Changed, []string{"b"}) {
		t.Errorf("Reload = %+v, %v", res, err)
	}

	d.b.ReloadErr = errors.Join(program.ErrBadConfig, errors.New("tend.toml:3: program.x.instances: must be >= 1"))
	_, err = c.Reload()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "tend.toml:3:") {
		t.Errorf("Reload with a bad config = %v", err)
	}

	shut := make(chan struct{})
	d.b.OnShutdown = func() { close(shut) }
	if err := c.Shutdown(); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	<-shut
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestAPIErrors(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	for name, call := range map[string]func() error{
		"status":  func() error { _, err := c.Status("nope:0"); return err },
		"start":   func() error { _, err := c.Start("nope"); return err },
		"remove":  func() error { return c.Remove("nope", program.RemoveOptions{}) },
		"logs":    func() error { return c.Logs(t.Context(), "nope:0", client.LogOptions{Tail: 1}, &bytes.Buffer{}) },
		"exists":  func() error { _, err := c.Add(map[string]any{"name": "web", "command": []string{"x"}}); return err },
		"invalid": func() error { _, err := c.Add(map[string]any{"name": "Web!", "command": []string{"x"}}); return err },
	} {
		err := call()
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: %v is not an *APIError", name, err)
			continue
		}
		want := map[string]int{"exists": 409, "invalid": 400}[name]
		if want == 0 {
			want = 404
		}
		if apiErr.Status != want || apiErr.Message == "" || apiErr.Error() != apiErr.Message {
			t.Errorf("%s: %+v, want status %d with a message", name, apiErr, want)
		}
		if errors.Is(err, client.ErrNoDaemon) {
			t.Errorf("%s: an API error is not ErrNoDaemon", name)
		}
	}
}

// ReloadResult is a copy of api.ReloadResult; they must not drift apart.
func TestReloadResultMatchesAPI(t *testing.T) {
	a, c := reflect.TypeFor[api.ReloadResult](), reflect.TypeFor[client.ReloadResult]()
	if a.NumField() != c.NumField() {
		t.Fatalf("api has %d fields, client %d", a.NumField(), c.NumField())
	}
	for i := range a.NumField() {
		fa, fc := a.Field(i), c.Field(i)
		if fa.Name != fc.Name || fa.Tag != fc.Tag || fa.Type != fc.Type {
			t.Errorf("field %d: api %s %s %q, client %s %s %q", i, fa.Name, fa.Type, fa.Tag, fc.Name, fc.Type, fc.Tag)
		}
	}
}

func TestLogs(t *testing.T) {
	d := startDaemon(t)
	c := client.New(d.path)
	path := filepath.Join(d.b.LogDir, "web:0.log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Logs(t.Context(), "web:0", client.LogOptions{Tail: 2}, &out); err != nil || out.String() != "two\nthree\n" {
		t.Errorf("Logs = %q, %v", out.String(), err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var buf testutil.Buffer
	done := make(chan error, 1)
	go func() { done <- c.Logs(ctx, "web:0", client.LogOptions{Tail: 1, Follow: true}, &buf) }()
	testutil.Eventually(t, "tail", func() bool { return buf.String() == "three\n" })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("four\n")
	f.Close()
	testutil.Eventually(t, "followed line", func() bool { return buf.String() == "three\nfour\n" })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Logs after cancel = %v, want nil", err)
	}
}
