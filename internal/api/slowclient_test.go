package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
)

// pipeListener hands out in-memory connections (net.Pipe), whose deadlines
// run on the synctest clock: the server's real timeouts can be tested
// without waiting for them.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// dial returns the client end of a new connection to the server.
func (l *pipeListener) dial(t *testing.T) net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	t.Cleanup(func() { client.Close() })
	return client
}

// servePipes runs a server over the seeded fake on a pipeListener until the
// test (inside a synctest bubble) ends.
func servePipes(t *testing.T) (*pipeListener, *apitest.Backend) {
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	srv := api.New(b, &apitest.Events{}, api.Options{})
	l := newPipeListener()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l, b
}

// closedWithin reports whether the server closes c (a read sees EOF or an
// error) within d of fake time, reading and dropping whatever it sends.
func closedWithin(c net.Conn, d time.Duration) bool {
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(d):
		c.Close() // ends the copy
		<-ended
		return false
	}
}

// A client that connects and never sends a byte, or stops in the middle of
// its headers, is dropped once the read-header timeout passes; meanwhile
// other clients are served.
func TestSilentClientIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := servePipes(t)
		silent := l.dial(t)
		partial := l.dial(t)
		go io.WriteString(partial, "GET /v1/status HTTP/1.1\r\nHost: tend\r\n")

		ok := l.dial(t)
		resp := roundTrip(t, ok, "GET /healthz HTTP/1.1\r\nHost: tend\r\n\r\n")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("healthz beside silent clients = %d", resp.StatusCode)
		}
		for name, c := range map[string]net.Conn{"silent": silent, "partial headers": partial} {
			if !closedWithin(c, time.Minute) {
				t.Errorf("a %s client is still connected after a minute", name)
			}
		}
	})
}

// A client that sends its headers and then not the body it announced gets
// an answer within a bounded time and its connection is closed, instead of
// holding a server goroutine for as long as it likes.
func TestStalledBodyIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name, req string
		code      int
	}{
		{"add", "POST /v1/programs HTTP/1.1\r\nHost: tend\r\nContent-Length: 100\r\n\r\n{\"name\":", http.StatusRequestTimeout},
		{"action", "POST /v1/programs/web/stop HTTP/1.1\r\nHost: tend\r\nContent-Length: 100\r\n\r\n", http.StatusOK},
		{"chunked", "POST /v1/programs HTTP/1.1\r\nHost: tend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"nam", http.StatusRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, _ := servePipes(t)
				c := l.dial(t)
				start := time.Now()
				resp := roundTrip(t, c, tc.req)
				if resp.StatusCode != tc.code || time.Since(start) > time.Minute {
					t.Errorf("stalled body: %d after %v, want %d within a minute", resp.StatusCode, time.Since(start), tc.code)
				}
				if !closedWithin(c, time.Minute) {
					t.Error("connection still open after the stalled body")
				}
			})
		})
	}
}

// roundTrip writes a raw request on c (without waiting for the write to be
// taken) and reads the response head and body.
func roundTrip(t *testing.T, c net.Conn, req string) *http.Response {
	t.Helper()
	go func() {
		if _, err := io.WriteString(c, req); err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Logf("writing request: %v", err)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading response to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	t.Logf("%s: %d %s", strings.SplitN(req, "\r\n", 2)[0], resp.StatusCode, body)
	return resp
}

// An attach client that never reads, while its terminal floods, costs a
// bounded queue for a bounded time (docs/trust.md#floods): it is dropped
// and detached within a minute, and a client that reads is served
// meanwhile.
func TestNonReadingAttachIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := apitest.NewBackend(t.TempDir())
		seed(b)
		terms := apitest.NewTerminals(b)
		terms.AddTTY("web:0", 80, 24)
		srv := api.New(b, &apitest.Events{}, api.Options{Terminals: terms})
		l := newPipeListener()
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(l) }()
		defer func() {
			srv.Close()
			if err := <-errc; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}()
		hc := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			return l.dial(t), nil
		}}}
		ctx := context.Background()
		mute, _, err := websocket.Dial(ctx, "ws://tend/v1/attach/web:0", &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		defer mute.CloseNow()
		synctest.Wait()
		if n := terms.Clients("web:0"); n != 1 {
			t.Fatalf("attached clients: %d, want 1", n)
		}
		chunk := []byte(strings.Repeat("flood ", 10<<10) + "\r\n")
		for range 64 { // 4 MiB: far past what the client's queue holds
			terms.Output("web:0", chunk)
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := terms.Clients("web:0"); n != 0 {
			t.Errorf("a client that never reads is still attached a minute on (%d clients)", n)
		}
	})
}
