package api_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
)

func newServer(t *testing.T) (*api.Server, *apitest.Backend, *apitest.Events) {
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	ev := &apitest.Events{}
	srv := api.New(b, ev, api.Options{})
	api.SetTimings(srv, 50*time.Millisecond, 10*time.Millisecond)
	return srv, b, ev
}

func TestServeUnix(t *testing.T) {
	srv, _, _ := newServer(t)
	path := serveUnix(t, srv)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("socket mode = %o, want 600", mode)
	}
	resp, err := unixClient(path).Get("http://tend/v1/status/web:0")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"web:0"`) {
		t.Errorf("over the socket: %d %s", resp.StatusCode, body)
	}
}

// A daemon killed outright leaves its socket file behind; the next one
// replaces it.
func TestServeUnixRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "tend.sock")
	old, _, _ := newServer(t)
	done := make(chan error, 1)
	go func() { done <- old.ServeUnix(path) }()
	waitFor(t, "first socket", func() bool { _, err := os.Stat(path); return err == nil })
	old.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeUnix after Close = %v, want nil", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("Close left the socket file behind")
	}
	makeStaleSocket(t, path)

	srv, _, _ := newServer(t)
	serveUnix2(t, srv, path)
}

func TestServeUnixRefusesNonSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "tend.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, _, _ := newServer(t)
	if err := srv.ServeUnix(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("ServeUnix over a regular file = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("the regular file was touched")
	}
}

func TestCloseBeforeServe(t *testing.T) {
	srv, _, _ := newServer(t)
	srv.Close()
	path := filepath.Join(socketDir(t), "tend.sock")
	if err := srv.ServeUnix(path); err != nil {
		t.Errorf("ServeUnix after Close = %v, want nil", err)
	}
}
