package api

// The TCP front's bounds, over real TCP: the Host allowlist, the connection
// cap, the write deadline, TLS, and /readyz through the guard.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A page of another site that rebinds its own name to 127.0.0.1 sends its
// name in Host: refused on every path, even the open ones.
func TestTCPHostAllowlist(t *testing.T) {
	f := newTCP(t)
	_, port, _ := net.SplitHostPort(f.addr)
	for host, want := range map[string]int{
		"127.0.0.1:" + port:           200,
		"localhost:" + port:           200,
		"LocalHost.:" + port:          200,
		"[::1]:" + port:               200,
		"rebind.evil.example:" + port: 421,
		"127.0.0.1:1":                 421, // another port: another server
		"127.0.0.1":                   421, // port 80
		"10.1.2.3:" + port:            421, // not the bound address
	} {
		req, _ := http.NewRequest("GET", f.base+"/healthz", nil)
		req.Host = host
		resp, err := f.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, body, want)
		}
		if want == 421 && !strings.Contains(string(body), `"error"`) {
			t.Errorf("Host %q: answer %q is not a JSON error", host, body)
		}
	}
}

func TestHostCheck(t *testing.T) {
	any7070 := &net.TCPAddr{IP: net.IPv4zero, Port: 7070}
	lan7070 := &net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 7070}
	leaf := &x509.Certificate{DNSNames: []string{"tend.example.com"}, IPAddresses: []net.IP{net.IPv4(203, 0, 113, 9)}}
	certs := []tls.Certificate{{Leaf: leaf}}
	for _, tc := range []struct {
		name       string
		configured string
		bound      net.Addr
		certs      []tls.Certificate
		tls        bool
		browser    string
		ok, refuse []string
	}{
		{name: "every address", configured: "0.0.0.0:7070", bound: any7070, browser: "127.0.0.1:7070",
			ok:     []string{"localhost:7070", "192.168.1.5:7070", "[fe80::1]:7070", "[::1]:7070"},
			refuse: []string{"myhost.example:7070", "192.168.1.5:7071", "192.168.1.5"}},
		{name: "a named host", configured: "myhost:7070", bound: lan7070, browser: "myhost:7070",
			ok:     []string{"myhost:7070", "MYHOST:7070", "192.168.1.5:7070", "127.0.0.1:7070"},
			refuse: []string{"192.168.1.6:7070", "other:7070"}},
		{name: "TLS names", configured: ":7070", bound: any7070, certs: certs, tls: true, browser: "tend.example.com:7070",
			ok:     []string{"tend.example.com:7070", "203.0.113.9:7070"},
			refuse: []string{"tend.example.com", "evil.example:7070"}},
		{name: "TLS on 443", configured: "192.168.1.5:443", bound: &net.TCPAddr{IP: lan7070.IP, Port: 443}, tls: true, browser: "192.168.1.5:443",
			ok:     []string{"192.168.1.5", "192.168.1.5:443"},
			refuse: []string{"192.168.1.5:80"}},
	} {
		h := newHostCheck(tc.configured, tc.bound, tc.certs, tc.tls)
		if h.browser != tc.browser {
			t.Errorf("%s: browser address %q, want %q", tc.name, h.browser, tc.browser)
		}
		for _, host := range tc.ok {
			if !h.allowed(host) {
				t.Errorf("%s: Host %q refused", tc.name, host)
			}
		}
		for _, host := range tc.refuse {
			if h.allowed(host) {
				t.Errorf("%s: Host %q allowed", tc.name, host)
			}
		}
	}
}

// At the cap a new connection waits until one ends, then is served; idle
// keep-alive connections are closed to make room at once.
func TestTCPConnectionCap(t *testing.T) {
	const maxConns = 3
	f := newTCPWith(t, TCPOptions{MaxConns: maxConns}, stubEvents{})
	fresh := func() *http.Client { // a client of its own: its own connections
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}

	// Hold every slot with an event stream.
	var streams []io.Closer
	for range maxConns {
		req, _ := http.NewRequest("GET", f.base+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := fresh().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("stream: %d", resp.StatusCode)
		}
		streams = append(streams, resp.Body)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := fresh().Get(f.base + "/healthz")
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("a connection over the cap was answered (%d) while %d streams held every slot", code, maxConns)
	case <-time.After(time.Second):
	}
	streams[0].Close()
	select {
	case code := <-answered:
		if code != 200 {
			t.Fatalf("the waiting connection: %d, want 200", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting connection was not served after a slot freed")
	}
	for _, s := range streams[1:] {
		s.Close()
	}

	// Idle keep-alive connections fill the slots; a new client is served
	// long before the idle timeout (a minute) would free them.
	clients := make([]*http.Client, maxConns+1)
	for i := range clients {
		clients[i] = fresh()
	}
	for i, c := range clients {
		start := time.Now()
		resp, err := c.Get(f.base + "/healthz")
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if d := time.Since(start); d > tcpIdleTimeout/2 {
			t.Errorf("client %d waited %v: idle connections were not closed to make room", i, d)
		}
	}
}

// floodEvents streams large events as fast as a reader takes them, and
// closes closed when a subscription ends.
type floodEvents struct {
	closed chan struct{}
	once   sync.Once
}

func (f *floodEvents) Since(uint64, int) ([]program.Event, error) { return nil, nil }
func (f *floodEvents) LastSeq() uint64                            { return 0 }

func (f *floodEvents) Subscribe(uint64) Subscription {
	s := &floodSub{c: make(chan program.Event), stop: make(chan struct{}), ev: f}
	go s.feed()
	return s
}

type floodSub struct {
	c    chan program.Event
	stop chan struct{}
	once sync.Once
	ev   *floodEvents
}

func (s *floodSub) feed() {
	payload := []byte(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	for seq := uint64(1); ; seq++ {
		select {
		case s.c <- program.Event{Seq: seq, Kind: program.KindDaemon, JSON: payload}:
		case <-s.stop:
			return
		}
	}
}

func (s *floodSub) C() <-chan program.Event { return s.c }
func (s *floodSub) CutOff() bool            { return false }
func (s *floodSub) Close() {
	s.once.Do(func() { close(s.stop) })
	s.ev.once.Do(func() { close(s.ev.closed) })
}

// A reader that stops reading an event stream is dropped once a write has
// waited WriteTimeout, and the stream's handler ends; others are served
// meanwhile.
func TestTCPStalledReaderIsDropped(t *testing.T) {
	ev := &floodEvents{closed: make(chan struct{})}
	f := newTCPWith(t, TCPOptions{WriteTimeout: 300 * time.Millisecond}, ev)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// (No small SO_RCVBUF: with loopback's 64 KiB segments it stalls the
	// window updates, and the drain after the drop would take minutes.)
	fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", f.addr, testToken)
	status, err := bufio.NewReaderSize(c, 4<<10).ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("stream: %q %v", status, err)
	}
	// Now read nothing.
	select {
	case <-ev.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream is still being written after 30s (write timeout 300ms)")
	}
	if r := f.do(t, "GET", "/healthz", nil); r.code != 200 {
		t.Errorf("healthz beside the stalled reader: %d", r.code)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, c)
	t.Logf("read %d more bytes, then %v", n, err)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Error("the stalled reader's connection is still open")
	}
}

// selfSigned makes a certificate for localhost and 127.0.0.1 (and names),
// and a pool that trusts it.
func selfSigned(t *testing.T, names ...string) (tls.Certificate, *x509.CertPool, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tend test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              append([]string{"localhost"}, names...),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return cert, pool, certPEM, keyPEM
}

func TestTCPTLS(t *testing.T) {
	cert, pool, _, _ := selfSigned(t, "tend.test")
	f := newTCPWith(t, TCPOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, stubEvents{})
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	f.hc.Transport = tr

	resp, err := f.hc.Get(f.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.ProtoMajor != 1 {
		t.Errorf("https healthz: %d, TLS %v, %s; want 200 over TLS, HTTP/1.1", resp.StatusCode, resp.TLS != nil, resp.Proto)
	}
	if r := f.do(t, "GET", "/v1/status", nil, "Authorization", "Bearer "+testToken); r.code != 200 {
		t.Errorf("token over TLS: %d %s", r.code, r.body)
	}
	c := f.login(t)
	if !c.Secure {
		t.Error("the session cookie under TLS is not Secure")
	}

	// The certificate's name is this server; another name is not.
	_, port, _ := net.SplitHostPort(f.addr)
	for host, want := range map[string]int{"tend.test:" + port: 200, "evil.example:" + port: 421} {
		req, _ := http.NewRequest("GET", f.base+"/healthz", nil)
		req.Host = host
		resp, err := f.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q over TLS: %d, want %d", host, resp.StatusCode, want)
		}
	}

	// The unix socket hands out https logins.
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", dashboardLoginPath, nil))
	var got loginBody
	json.Unmarshal(rec.Body.Bytes(), &got)
	if !strings.HasPrefix(got.URL, "https://") {
		t.Errorf("login url %q under TLS", got.URL)
	}

	// Plain HTTP to the TLS port is not served.
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Get("http://" + f.addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP served on the TLS port")
		}
	}
}

// /readyz is open over TCP, with the counts only; the ids not ready go to
// the token and to the unix socket.
func TestReadyzThroughGuard(t *testing.T) {
	f := newTCP(t)
	type readiness struct {
		Ready     bool     `json:"ready"`
		Instances *int     `json:"instances"`
		NotReady  []string `json:"not_ready"`
	}
	check := func(what string, r reply, wantIDs bool) {
		t.Helper()
		var got readiness
		if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != 503 || got.Ready || got.Instances == nil || *got.Instances != 1 {
			t.Errorf("%s: %d %s, want 503 with the counts", what, r.code, r.body)
		}
		if hasIDs := len(got.NotReady) > 0; hasIDs != wantIDs {
			t.Errorf("%s: not_ready %v, want ids: %v", what, got.NotReady, wantIDs)
		}
	}
	check("no token", f.do(t, "GET", "/readyz", nil), false)
	check("wrong token", f.do(t, "GET", "/readyz", nil, "Authorization", "Bearer nope"), false)
	check("a session", f.do(t, "GET", "/readyz", nil, f.login(t).hdr()...), false)
	check("the token", f.do(t, "GET", "/readyz", nil, "Authorization", "Bearer "+testToken), true)

	dir, err := os.MkdirTemp("", "tendrz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "tend.sock")
	errc := make(chan error, 1)
	go func() { errc <- f.srv.ServeUnix(sock) }()
	t.Cleanup(func() { f.srv.Close(); <-errc })
	uc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var resp *http.Response
	testutil.Eventually(t, "the unix socket to answer", func() bool { resp, err = uc.Get("http://tend/readyz"); return err == nil },
		testutil.Explain(func() string { return fmt.Sprint(err) }))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check("the unix socket", reply{resp.StatusCode, resp.Header, string(body)}, true)
}
