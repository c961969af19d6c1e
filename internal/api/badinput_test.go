package api_test

// The bad-input sweep, over a real unix socket: oversized bodies, bad
// UTF-8, path tricks in ids, huge and negative numbers in queries, many
// subscribers and idle connections. Each gets a clear error or a bounded
// cost, and the server keeps answering.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// askedBackend is the fake backend that records every id that reached
// it: the handlers must not ask it about an id that is not a selector.
type askedBackend struct {
	*apitest.Backend
	mu    sync.Mutex // guards asked
	asked []string
}

func (b *askedBackend) record(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, id)
}

func (b *askedBackend) ids() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.asked)
}

func (b *askedBackend) LogSources(id string, labels program.LabelSelector) ([]logfile.Source, error) {
	b.record(id)
	return b.Backend.LogSources(id, labels)
}

func (b *askedBackend) Restart(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	b.record(sel)
	return b.Backend.Restart(ctx, sel, opts)
}

func (b *askedBackend) Remove(ctx context.Context, name string, opts program.RemoveOptions) error {
	b.record(name)
	return b.Backend.Remove(ctx, name, opts)
}

// socketFixture serves b on a unix socket and returns a fixture for it and
// the socket's path.
func socketFixture(t *testing.T, b api.Backend, ev *apitest.Events) (*fixture, string) {
	t.Helper()
	srv := api.New(b, ev, api.Options{})
	api.SetTimings(srv, time.Minute, 10*time.Millisecond)
	path := serveUnix(t, srv)
	return &fixture{srv: srv, ev: ev, url: "http://tend", hc: unixClient(path)}, path
}

// wantJSONError checks a 4xx answer with a JSON error message.
func wantJSONError(t *testing.T, what string, code int, body string, want int) {
	t.Helper()
	if code != want {
		t.Errorf("%s = %d %s, want %d", what, code, body, want)
		return
	}
	if e := decode[map[string]any](t, body)["error"]; e == "" || e == nil {
		t.Errorf("%s = %d without an error message: %s", what, code, body)
	}
}

// rawRequest writes req on a new connection to the socket and reads the
// answer. The request is written while the answer is read, so a server
// that answers before taking the whole body does not deadlock the test.
func rawRequest(t *testing.T, sock, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, req) // fails once the server has closed: fine
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.40q: %v", req, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestBadInputOversizedBody(t *testing.T) {
	_, sock := socketFixture(t, apitest.NewBackend(t.TempDir()), &apitest.Events{})
	big := `{"name":"big","command":["` + strings.Repeat("x", 2<<20) + `"]}`
	code, body := rawRequest(t, sock, fmt.Sprintf("POST /v1/programs HTTP/1.1\r\nHost: tend\r\nContent-Length: %d\r\n\r\n%s", len(big), big))
	wantJSONError(t, "2 MiB body", code, body, http.StatusRequestEntityTooLarge)
	code, body = rawRequest(t, sock, "POST /v1/programs HTTP/1.1\r\nHost: tend\r\nTransfer-Encoding: chunked\r\n\r\n"+
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big))
	wantJSONError(t, "2 MiB chunked body", code, body, http.StatusRequestEntityTooLarge)
	// Headers past net/http's 1 MB limit are refused before any handler.
	code, _ = rawRequest(t, sock, "GET /healthz HTTP/1.1\r\nHost: tend\r\nX-Pad: "+strings.Repeat("x", 2<<20)+"\r\n\r\n")
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("2 MiB of headers = %d, want 431", code)
	}
}

func TestBadInputUTF8(t *testing.T) {
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	f, sock := socketFixture(t, b, &apitest.Events{})
	for _, body := range []string{
		"{\"name\":\"jobs\",\"command\":[\"echo\",\"\xff\xfe\"]}",
		"{\"name\":\"jo\xffbs\",\"command\":[\"echo\"]}",
		"{\"name\":\"jobs\",\"command\":[\"echo\"],\"env\":{\"A\xc0\":\"1\"}}",
		"\xef\xbb\xbf{\"name\":\"jobs\",\"command\":[\"echo\"]}", // a BOM is not JSON
	} {
		code, answer := f.do(t, "POST", "/v1/programs", body)
		wantJSONError(t, fmt.Sprintf("POST %q", body), code, answer, http.StatusBadRequest)
	}
	if ids, _ := b.List(false, nil); ids.Len() != 3 {
		t.Errorf("bad bodies added programs: %v", ids)
	}
	for _, req := range [][2]string{
		{"GET", "/v1/status/web%FF:0"},
		{"GET", "/v1/status/%C0%AE%C0%AE:0"}, // an overlong "..": not UTF-8
		{"GET", "/v1/logs/web:0%FF"},
		{"POST", "/v1/programs/%FF/start"},
		{"DELETE", "/v1/programs/web%FF"},
	} {
		code, answer := f.do(t, req[0], req[1], "")
		wantJSONError(t, req[0]+" "+req[1], code, answer, http.StatusNotFound)
	}
	code, answer := f.do(t, "GET", "/v1/events?id=%FF", "", "Accept", "application/json")
	wantJSONError(t, "events id=%FF", code, answer, http.StatusBadRequest)
	// Raw bytes that are not UTF-8 in the request line: net/http or the
	// API refuses them; nothing is served.
	code, _ = rawRequest(t, sock, "GET /v1/status/web\xff:0 HTTP/1.1\r\nHost: tend\r\n\r\n")
	if code != http.StatusBadRequest && code != http.StatusNotFound {
		t.Errorf("raw \\xff in the path = %d, want 400 or 404", code)
	}
}

// Ids that try to climb out of the logs dir never reach the backend, and
// nothing outside the logs dir is ever sent.
func TestBadInputPathTricks(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	if err := os.Mkdir(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret.log", "x.log"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("SECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := &askedBackend{Backend: apitest.NewBackend(logs)}
	seed(b.Backend)
	f, sock := socketFixture(t, b, &apitest.Events{})
	tricks := []string{
		"..", "../secret", "../x", "..%2Fsecret", "%2e%2e%2fsecret", "%2E%2E", "..%5Csecret",
		"web:0%2F..%2F..%2Fsecret", "%2Fetc%2Fpasswd", "web%00", "web:0%00", "%252e%252e%252fsecret",
	}
	for _, id := range tricks {
		for _, req := range [][2]string{
			{"GET", "/v1/logs/" + id + "?tail=5"},
			{"GET", "/v1/status/" + id},
			{"POST", "/v1/programs/" + id + "/restart"},
			{"DELETE", "/v1/programs/" + id},
		} {
			code, body := f.do(t, req[0], req[1], "")
			wantJSONError(t, req[0]+" "+req[1], code, body, http.StatusNotFound)
			if strings.Contains(body, "SECRET") {
				t.Errorf("%s %s sent a file outside the logs dir", req[0], req[1])
			}
		}
	}
	// Unescaped, the URL itself is a path: the server answers for the
	// cleaned path (a redirect or 404), never for an id.
	for _, target := range []string{"/v1/logs/../secret", "/v1/logs/web:0/../../../secret", "/v1/logs/./../x", "/v1/programs/../../v1/shutdown"} {
		code, body := rawRequest(t, sock, "GET "+target+" HTTP/1.1\r\nHost: tend\r\n\r\n")
		if (code != http.StatusTemporaryRedirect && code != http.StatusNotFound && code != http.StatusMethodNotAllowed) ||
			strings.Contains(body, "SECRET") {
			t.Errorf("GET %s = %d %q, want a redirect, 404 or 405", target, code, body)
		}
	}
	if asked := b.ids(); len(asked) > 0 {
		t.Errorf("malformed ids reached the backend: %q", asked)
	}
}

func TestBadInputNumbers(t *testing.T) {
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	ev := &apitest.Events{}
	for range 3 {
		ev.Publish("started", "web:0", nil)
	}
	f, _ := socketFixture(t, b, ev)
	// A log of 20 MiB in 2-byte lines: far more lines than the tail cap.
	log := strings.Repeat("x\n", 10<<20)
	if err := os.WriteFile(filepath.Join(b.LogDir, "web:0.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := f.hc.Get(f.url + "/v1/logs/web:0?tail=99999999999")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if resp.StatusCode != 200 || n != 2*100000 {
		t.Errorf("tail=99999999999 = %d with %d bytes, want the capped 100000 lines", resp.StatusCode, n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("a tail of a 20 MiB log allocated %d MiB", alloc>>20)
	}

	for _, tc := range []struct {
		path, accept string
		code         int
		want         string // the answer, for a 200
	}{
		{"/v1/logs/web:0?tail=99999999999999999999", "", 400, ""},
		{"/v1/logs/web:0?tail=-5", "", 400, ""},
		{"/v1/logs/web:0?tail=0", "", 200, ""},
		{"/v1/logs/web:0?resume=web:0/1/0", "", 400, ""}, // resume is for a follow
		{"/v1/logs/web:0?follow=1&resume=web:0/x/0", "", 400, ""},
		{"/v1/logs/web:0?follow=1&resume=web:0/1/-2", "", 400, ""},
		{"/v1/logs/web:0?follow=1&resume=,", "", 400, ""},
		{"/v1/events?since=-1", "application/json", 400, ""},
		{"/v1/events?since=-1", "text/event-stream", 400, ""},
		{"/v1/events?since=18446744073709551616", "application/json", 400, ""},
		{"/v1/events?since=18446744073709551615", "application/json", 200, "[]\n"},
		{"/v1/events?since=3", "application/json", 200, "[]\n"},
		{"/v1/events?since=0&limit=99999999999", "application/json", 200, ""},
		{"/v1/events?limit=99999999999999999999", "application/json", 400, ""},
		{"/v1/doctor?since=-1h", "", 400, ""},
		{"/v1/doctor?since=9999999999h", "", 400, ""},
		{"/v1/events?kinds=" + manyKinds(65), "text/event-stream", 400, ""},
		{"/v1/events?kinds=" + manyKinds(64) + ",started", "application/json", 400, ""},
		{"/v1/events?kinds=" + strings.Repeat("started,", 10000), "application/json", 200, ""},
	} {
		code, body := f.do(t, "GET", tc.path, "", "Accept", tc.accept)
		switch {
		case tc.code != 200:
			wantJSONError(t, tc.path, code, body, tc.code)
		case code != 200 || tc.want != "" && body != tc.want:
			t.Errorf("%s (%s) = %d %q, want 200 %q", tc.path, tc.accept, code, body, tc.want)
		}
	}
	code, body := f.do(t, "GET", "/v1/events", "", "Accept", "application/json", "Last-Event-ID", "-1")
	wantJSONError(t, "Last-Event-ID: -1", code, body, 400)

	// A stream from beyond the end is empty and waits for live events.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := openStream(t, f.hc, sseRequest(t, ctx, f.url+"/v1/events?since=18446744073709551615"))
	if s.resp.StatusCode != 200 {
		t.Fatalf("SSE since=max = %d", s.resp.StatusCode)
	}
	ev.Publish("started", "web:1", nil)
	time.Sleep(50 * time.Millisecond) // give a wrong event time to arrive
	if got := s.String(); strings.Contains(got, "event:") {
		t.Errorf("SSE since=max sent %q", got)
	}
}

// manyKinds is a kinds= value naming n different kinds.
func manyKinds(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d,", i)
	}
	return b.String()
}

// sseClient is one raw subscriber connection.
type sseClient struct {
	c net.Conn
	r *bufio.Reader
}

// subscribe opens GET /v1/events as an event stream on a new connection.
func subscribe(sock string) (*sseClient, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, "GET /v1/events HTTP/1.1\r\nHost: tend\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(r, nil)
	if err == nil && (resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream") {
		err = fmt.Errorf("answer %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return &sseClient{c: c, r: bufio.NewReaderSize(resp.Body, 512)}, nil
}

// waitEvent reads until the event with id seq.
func (s *sseClient) waitEvent(seq string) error {
	s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return err
		}
		if line == "id: "+seq+"\n" {
			return nil
		}
	}
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A thousand subscribers at once are all served, cost a bounded amount of
// memory each, and give back every goroutine once they leave.
func TestBadInputThousandSubscribers(t *testing.T) {
	const n = 1000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < 2*n+100 {
		t.Skipf("open file limit %d is too low for %d connections", lim.Cur, n)
	}
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	ev := &apitest.Events{Buffer: 64}
	f, sock := socketFixture(t, b, ev)
	f.hc.CloseIdleConnections()
	goroutines, heap := runtime.NumGoroutine(), heapNow()

	subs := make([]*sseClient, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				s, err := subscribe(sock)
				if err != nil {
					errs <- err
					return
				}
				subs[i] = s
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("subscribing: %v", err)
	}
	defer func() {
		for _, s := range subs {
			s.c.Close()
		}
	}()
	testutil.Eventually(t, "every subscription", func() bool { return ev.Subscribers() == n })

	// Everyone hears a live event, and ordinary requests are still served.
	ev.Publish("started", "web:0", nil)
	for i, s := range subs {
		if err := s.waitEvent("1"); err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
	}
	if code, body := f.do(t, "GET", "/v1/status/web:0", ""); code != 200 {
		t.Errorf("status beside %d subscribers = %d %s", n, code, body)
	}
	f.hc.CloseIdleConnections()
	perSub := int64(heapNow()-heap) / n
	t.Logf("%d subscribers: %d goroutines more, about %d KiB of heap each", n, runtime.NumGoroutine()-goroutines, perSub>>10)
	if perSub > 256<<10 {
		t.Errorf("each subscriber holds %d KiB of heap", perSub>>10)
	}

	for _, s := range subs {
		s.c.Close()
	}
	testutil.Eventually(t, "subscriptions to close", func() bool { return ev.Subscribers() == 0 })
	testutil.Eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines+5 })
	if after := heapNow(); after > heap+16<<20 {
		t.Errorf("heap after the subscribers left: %d MiB more than before", (after-heap)>>20)
	}
}

// Idle connections (silent, half a request line, a stalled body) cost a
// goroutine each, block nothing, and are released when their clients go.
func TestBadInputIdleConnections(t *testing.T) {
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	f, sock := socketFixture(t, b, &apitest.Events{})
	f.hc.CloseIdleConnections()
	goroutines := runtime.NumGoroutine()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 100 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 1:
			io.WriteString(c, "GET /v1/sta")
		case 2:
			io.WriteString(c, "POST /v1/programs HTTP/1.1\r\nHost: tend\r\nContent-Length: 64\r\n\r\n{")
		}
	}
	for _, req := range [][2]string{{"GET", "/v1/status"}, {"POST", "/v1/programs/web/restart"}, {"GET", "/healthz"}} {
		if code, body := f.do(t, req[0], req[1], ""); code != 200 {
			t.Errorf("%s %s beside 100 idle connections = %d %s", req[0], req[1], code, body)
		}
	}
	f.hc.CloseIdleConnections()
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines+5 })
}
