package api_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/testutil"
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
	testutil.Eventually(t, "first socket", func() bool { _, err := os.Stat(path); return err == nil })
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

// The dashboard is served on the unix socket too, with no login, so that
// "ssh -L 7070:/path/tend.sock host" reaches it.
func TestDashboardOnSocket(t *testing.T) {
	f := newFixtureOn(t, "unix")
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript"} {
		resp, err := f.hc.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s on the socket: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	// The login page has nothing to do there: on to the dashboard.
	noRedirect := &http.Client{Transport: f.hc.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("GET /login on the socket: %d %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Through a tunnel, a browser's pages could reach the socket: a Host of
// another site (DNS rebinding) and a cross-origin change are refused.
func TestSocketRefusesWhatOnlyAPageSends(t *testing.T) {
	f := newFixtureOn(t, "unix")
	send := func(method, host, origin string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://tend/v1/programs/web:0/restart", nil)
		if method == "GET" {
			req.URL.Path = "/v1/status"
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := f.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, host, origin string
		want                 int
	}{
		{"GET", "tend", "", 200},                                 // package client
		{"GET", "localhost:7070", "", 200},                       // a tunnelled browser
		{"GET", "127.0.0.1:7070", "", 200},                       //
		{"GET", "rebind.evil.example:7070", "", 421},             // a rebound name
		{"POST", "localhost:7070", "http://localhost:7070", 200}, // the dashboard's own button
		{"POST", "localhost:7070", "http://evil.example", 403},   // another site's form
		{"POST", "localhost:7070", "null", 403},                  // a sandboxed or file page
		{"POST", "tend", "", 200},                                // the CLI sends no Origin
		{"POST", "rebind.evil.example:7070", "http://rebind.evil.example:7070", 421},
	} {
		if got := send(tc.method, tc.host, tc.origin); got != tc.want {
			t.Errorf("%s Host %q Origin %q: %d, want %d", tc.method, tc.host, tc.origin, got, tc.want)
		}
	}
}

// A connection from a uid other than 0 or the daemon's is refused even
// when the socket's permissions would let it in. As root: a child running
// as nobody connects to a socket made world-writable for the test.
func TestSocketRefusesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	dir := socketDir(t)
	if err := os.Chmod(dir, 0o711); err != nil { // nobody may traverse it, not list it
		t.Fatal(err)
	}
	srv, _, _ := newServer(t)
	path := filepath.Join(dir, "tend.sock")
	serveUnix2(t, srv, path)
	if err := os.Chmod(path, 0o666); err != nil { // as if the modes had slipped
		t.Fatal(err)
	}
	bin := copyTestBinary(t, dir)

	cmd := exec.Command(bin, "-test.run=^TestHelperDialSocket$")
	cmd.Env = append(os.Environ(), "TEND_TEST_DIAL="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "HTTP/1.1 403") || !strings.Contains(string(out), "uid 65534 may not use this socket") ||
		strings.Contains(string(out), `"ok":true`) {
		t.Errorf("nobody's request was not refused:\n%s", out)
	}
	// Root still gets in.
	resp, err := unixClient(path).Get("http://tend/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("root: %d", resp.StatusCode)
	}
}

const nobody = 65534

// TestHelperDialSocket is the child of TestSocketRefusesOtherUsers: it sends
// GET /healthz to the socket at $TEND_TEST_DIAL and prints the answer.
func TestHelperDialSocket(t *testing.T) {
	path := os.Getenv("TEND_TEST_DIAL")
	if path == "" {
		t.Skip("a helper process")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial as uid %d: %v", os.Getuid(), err)
	}
	defer c.Close()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: tend\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	fmt.Printf("%s\n", b)
}

// copyTestBinary copies the running test binary into dir, where a child of
// another uid can run it (go test's own directory is private).
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "api.test")
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
