package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// runHTTP runs the daemon on config (written into a short temp dir, with
// %[1]s the dir) until the test ends; it returns a client and the
// daemon's output.
func runHTTP(t *testing.T, config string) (*client.Client, *testutil.Buffer, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tendhttp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(path, fmt.Appendf(nil, config, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testutil.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: path, Stderr: out}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("daemon did not stop")
		}
	})
	c := client.New(filepath.Join(dir, ".tend", SocketName))
	testutil.Eventually(t, "the daemon to answer", func() bool { _, err := c.Health(); return err == nil })
	return c, out, dir
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns a pool trusting it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tend test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const quietFleet = `
[program.idle]
command = ["sleep", "3600"]
stop_grace = "1s"
`

// With tls_cert and tls_key the daemon serves HTTPS, hands out https
// logins, and warns about nothing.
func TestHTTPWithTLS(t *testing.T) {
	certDir := t.TempDir()
	pool := writeCert(t, certDir)
	port := freePort(t)
	c, out, _ := runHTTP(t, fmt.Sprintf(`[daemon]
state_dir = "%%[1]s/.tend"
http = "127.0.0.1:%d"
tls_cert = %q
tls_key = %q
`, port, filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "key.pem"))+quietFleet)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("https healthz: %d", resp.StatusCode)
	}
	login, err := c.DashboardLogin()
	if err != nil || login.URL != base+"/" {
		t.Errorf("login %+v, %v; want the dashboard at %s/", login, err, base)
	}
	resp, err = hc.PostForm(base+"/login", map[string][]string{"code": {login.Code}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); resp.StatusCode != 200 || len(cs) != 1 || !cs[0].Secure {
		t.Errorf("login over TLS: %d, cookies %v; want one Secure cookie", resp.StatusCode, cs)
	}
	if strings.Contains(out.String(), "warning") {
		t.Errorf("a warning for a loopback TLS listener:\n%s", out.String())
	}
}

// A certificate or key that cannot be loaded stops the start with one
// line naming the key, as a config error (exit 2).
func TestHTTPBadTLS(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	other := t.TempDir()
	writeCert(t, other) // a key that is not the certificate's
	os.WriteFile(filepath.Join(dir, "garbage.pem"), []byte("not a certificate\n"), 0o600)
	for _, tc := range []struct{ cert, key, want string }{
		{"missing.pem", "key.pem", "tls_cert"},
		{"garbage.pem", "key.pem", "tls_cert"},
		{"cert.pem", "missing.pem", "tls_key"},
		{"cert.pem", "garbage.pem", "tls_key"},
		{"cert.pem", filepath.Join(other, "key.pem"), "tls_key"},
	} {
		cfg := filepath.Join(dir, "tend.toml")
		os.WriteFile(cfg, fmt.Appendf(nil, "[daemon]\nstate_dir = %q\nhttp = \"127.0.0.1:0\"\ntls_cert = %q\ntls_key = %q\n"+quietFleet,
			filepath.Join(dir, ".tend"), tc.cert, tc.key), 0o600)
		err := Run(context.Background(), Options{ConfigPath: cfg, Stderr: io.Discard})
		if !errors.Is(err, program.ErrBadConfig) || !strings.Contains(err.Error(), "[daemon] "+tc.want+":") || strings.Contains(err.Error(), "\n") {
			t.Errorf("cert %s, key %s: %v; want one line, a config error naming %s", tc.cert, tc.key, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tend", SocketName)); err == nil {
		t.Error("a daemon with a bad certificate made its socket")
	}
}

// Plain HTTP on every address says, at start, that others can reach it.
func TestHTTPWarnsWithoutTLS(t *testing.T) {
	port := freePort(t)
	_, out, _ := runHTTP(t, fmt.Sprintf("[daemon]\nstate_dir = \"%%[1]s/.tend\"\nhttp = \"0.0.0.0:%d\"\n", port)+quietFleet)
	if !strings.Contains(out.String(), "tend: warning: http = \"0.0.0.0:") || !strings.Contains(out.String(), "tls_cert") {
		t.Errorf("no warning for plain HTTP on every address:\n%s", out.String())
	}
}

// Without daemon.http the dashboard is still served on the unix socket.
func TestDashboardOnTheSocket(t *testing.T) {
	c, out, _ := runHTTP(t, "[daemon]\nstate_dir = \"%[1]s/.tend\"\n"+quietFleet)
	body := get(t, c.Socket(), "/")
	if !strings.Contains(body, "<!doctype html>") || !strings.Contains(body, "/ui/app.js") {
		t.Errorf("GET / on the socket:\n%.300s", body)
	}
	if _, err := c.DashboardLogin(); !errors.Is(err, client.ErrNoDashboard) {
		t.Errorf("a login without TCP: %v, want ErrNoDashboard", err)
	}
	if strings.Contains(out.String(), "warning") {
		t.Errorf("a warning without TCP:\n%s", out.String())
	}
}

// api_add = "unix": over TCP the token cannot add a program (403, saying
// why); the unix socket still can.
func TestHTTPAPIAddUnix(t *testing.T) {
	port := freePort(t)
	c, _, dir := runHTTP(t, fmt.Sprintf(`[daemon]
state_dir = "%%[1]s/.tend"
http = "127.0.0.1:%d"
api_add = "unix"
`, port)+quietFleet)
	token, err := os.ReadFile(filepath.Join(dir, ".tend", "token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v1/programs", port),
		strings.NewReader(`{"name": "added", "command": ["sleep", "3600"]}`))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "api_add") {
		t.Errorf("POST /v1/programs over TCP with the token and api_add = unix: %d %s, want 403 naming api_add", resp.StatusCode, body)
	}
	if _, err := c.Status("added:0"); err == nil {
		t.Error("the program was added over TCP")
	}
}
