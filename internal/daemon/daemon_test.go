package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// These tests run the whole daemon in this test process, one at a time: it
// owns wait4 for the process while it runs, so nothing else here may wait for
// children and no two daemons may overlap.

// startDaemon runs tend up on config in a temp dir and returns a client.
func startDaemon(t *testing.T, dir, config string) (*client.Client, func()) {
	t.Helper()
	path := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: path, Stderr: io.Discard}) }()
	c := client.New(filepath.Join(dir, ".tend", SocketName))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Health(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("daemon never answered: %v", <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("daemon did not stop")
		}
		if kids := children(); len(kids) != 0 {
			t.Errorf("processes left after the daemon stopped: %v", kids)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

// sse is a raw Server-Sent Events reader over the unix socket.
type sse struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialSSE(t *testing.T, sock string, lastID uint64) *sse {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /v1/events HTTP/1.1\r\nHost: tend\r\nAccept: text/event-stream\r\n"
	if lastID > 0 {
		req += "Last-Event-ID: " + strconv.FormatUint(lastID, 10) + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	s := &sse{conn: conn, r: bufio.NewReader(conn)}
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("SSE response: %v %v", resp, err)
	}
	s.r = bufio.NewReader(resp.Body)
	return s
}

// next returns the next event's id and kind.
func (s *sse) next(t *testing.T) (uint64, string) {
	t.Helper()
	id, kind, err := s.tryNext()
	if err != nil {
		t.Fatalf("reading SSE: %v", err)
	}
	return id, kind
}

// errCutOff is a stream the daemon ended for a slow reader.
var errCutOff = errors.New("cut off")

// tryNext is next that reports the end of the stream as an error.
func (s *sse) tryNext() (uint64, string, error) {
	s.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var id uint64
	var kind string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return 0, "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case line == "" && kind == "cutoff":
			return 0, "", errCutOff
		case line == "" && id > 0:
			return id, kind, nil
		}
	}
}

func TestSSEResumesWithLastEventIDWithoutLossOrRepeat(t *testing.T) {
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, "[program.w]\ncommand = [\"sleep\", \"1000\"]\nstop_grace = \"2s\"\n")
	testutil.Eventually(t, "w:0 running", func() bool { st, err := c.Status("w:0"); return err == nil && st.State == "running" })
	sock := filepath.Join(dir, ".tend", SocketName)

	s := dialSSE(t, sock, 0)
	var last uint64
	for last < 3 {
		id, _ := s.next(t)
		if id != last+1 {
			t.Fatalf("live stream: seq %d after %d", id, last)
		}
		last = id
	}
	s.conn.Close()           // the reader goes away...
	for i := 0; i < 3; i++ { // ...while events happen
		if _, err := c.Restart("w"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the restart", func() bool { st, _ := c.Status("w:0"); return st.Run == i+2 && st.State == "running" })
	}
	missed, err := c.Events(last)
	if err != nil || len(missed) < 6 {
		t.Fatalf("backlog after %d: %d events, %v", last, len(missed), err)
	}
	s = dialSSE(t, sock, last)
	defer s.conn.Close()
	for _, want := range missed {
		id, kind := s.next(t)
		if id != want.Seq || kind != want.Kind {
			t.Fatalf("resumed stream gave #%d %s, want #%d %s", id, kind, want.Seq, want.Kind)
		}
	}
}

func TestASubscriberThatNeverReadsDelaysNothing(t *testing.T) {
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, `[program.loop]
shell = "exit 1"
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000
`)
	sock := filepath.Join(dir, ".tend", SocketName)
	// A client that asks for the stream and never reads a byte.
	stuck, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprint(stuck, "GET /v1/events?since=0 HTTP/1.1\r\nHost: tend\r\n\r\n")

	fast := dialSSE(t, sock, 0)
	var last uint64
	for last < 20000 { // far more than a subscriber buffer and the socket buffers hold
		id, _, err := fast.tryNext()
		if err != nil {
			// A reader this test process could not schedule in time is cut
			// off too; as documented, it resumes from its last seq.
			fast.conn.Close()
			fast = dialSSE(t, sock, last)
			continue
		}
		if id != last+1 {
			t.Fatalf("fast subscriber: seq %d after %d", id, last)
		}
		last = id
	}
	fast.conn.Close()
	st, err := c.Status("loop:0")
	if err != nil || st.Restarts.Crash < 2000 {
		t.Fatalf("the crash loop was held back: %+v %v", st.Restarts, err)
	}
	resp := get(t, sock, "/metrics")
	if strings.Contains(resp, "tend_event_subscribers_cut_off_total 0") || !strings.Contains(resp, "tend_event_subscribers_cut_off_total") {
		t.Errorf("the stuck subscriber was not cut off:\n%s", grepLines(resp, "tend_event"))
	}
}

func TestSeqSurvivesARestartOfTheDaemon(t *testing.T) {
	dir := t.TempDir()
	config := "[program.w]\ncommand = [\"sleep\", \"1000\"]\n"
	c, stop := startDaemon(t, dir, config)
	testutil.Eventually(t, "w:0 running", func() bool { st, err := c.Status("w:0"); return err == nil && st.State == "running" })
	first, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	c, _ = startDaemon(t, dir, config)
	testutil.Eventually(t, "w:0 running again", func() bool { st, err := c.Status("w:0"); return err == nil && st.State == "running" })
	all, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: a gap or a restart of the numbering", i, e.Seq)
		}
	}
	if len(all) <= len(first)+2 || all[len(first)].Kind != program.KindDaemon {
		t.Errorf("the second daemon's events do not follow the first's: %d then %d", len(first), len(all))
	}
	if _, err := c.Status("nope:0"); !isNotFound(err) {
		t.Errorf("unknown id: %v", err)
	}
}

// get fetches path over the unix socket.
func get(t *testing.T, sock, path string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://tend" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func isNotFound(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == 404
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
