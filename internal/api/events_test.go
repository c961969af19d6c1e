package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// publishSome publishes five events of several kinds and instances.
func publishSome(f *fixture) {
	code := 1
	f.ev.Publish(program.KindDaemon, "", program.DaemonPhase{Phase: program.PhaseStarted, PID: 7})
	f.ev.Publish(program.KindSpawned, "web:0", program.Spawned{PID: 100, Run: 1})
	f.ev.Publish(program.KindSpawned, "web:1", program.Spawned{PID: 101, Run: 1})
	f.ev.Publish(program.KindExited, "web:1", program.Exited{PID: 101, Code: &code, LikelyCause: program.CauseRuntimeError, CrashCount: 1})
	f.ev.Publish(program.KindSpawned, "planner:0", program.Spawned{PID: 102, Run: 1})
}

func seqs(events []program.Event) []uint64 {
	var out []uint64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func TestEventsJSON(t *testing.T) {
	f := newFixture(t)
	publishSome(f)
	for _, tc := range []struct {
		query string
		want  []uint64
	}{
		{"", []uint64{1, 2, 3, 4, 5}},
		{"since=0", []uint64{1, 2, 3, 4, 5}},
		{"since=3", []uint64{4, 5}},
		{"since=5", nil},
		{"since=99", nil},
		{"kinds=exited", []uint64{4}},
		{"kinds=exited,daemon", []uint64{1, 4}},
		{"id=web", []uint64{2, 3, 4}},
		{"id=web:1", []uint64{3, 4}},
		{"id=all", []uint64{2, 3, 4, 5}},
		{"id=web&kinds=spawned&since=2", []uint64{3}},
		{"limit=2", []uint64{1, 2}},
		{"limit=1&kinds=exited", []uint64{4}}, // the filter does not shorten the page
		{"limit=2&id=web:1", []uint64{3, 4}},
	} {
		code, body := f.do(t, "GET", "/v1/events?"+tc.query, "", "Accept", "application/json")
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.query, code, body)
		}
		if !strings.HasPrefix(body, "[") {
			t.Errorf("%s: body %s is not an array", tc.query, body)
		}
		if got := seqs(decode[[]program.Event](t, body)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: seqs %v, want %v", tc.query, got, tc.want)
		}
	}
	// format=json works without the header, and the events keep their fields.
	_, body := f.do(t, "GET", "/v1/events?format=json&kinds=exited", "")
	if !strings.Contains(body, `"code":1`) || !strings.Contains(body, `"likely_cause":"runtime_error"`) {
		t.Errorf("exited event lost its fields: %s", body)
	}
}

func TestEventsBadQuery(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{"since=-1", "since=x", "since=1.5", "limit=0", "limit=-3", "id=Bad!"} {
		for _, accept := range []string{"application/json", "text/event-stream"} {
			if strings.HasPrefix(q, "limit=") && accept != "application/json" {
				continue // limit only applies to the backlog
			}
			code, body := f.do(t, "GET", "/v1/events?"+q, "", "Accept", accept)
			if code != 400 || !strings.Contains(body, `"error"`) {
				t.Errorf("%s (%s) = %d %s, want 400", q, accept, code, body)
			}
		}
	}
	code, _ := f.do(t, "GET", "/v1/events", "", "Accept", "text/event-stream", "Last-Event-ID", "nope")
	if code != 400 {
		t.Errorf("bad Last-Event-ID = %d, want 400", code)
	}
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, kind, data string
}

// parseSSE splits a stream into its events, skipping comments.
func parseSSE(t *testing.T, text string) (events []sseEvent, comments int) {
	t.Helper()
	blocks := strings.Split(text, "\n\n")
	for _, block := range blocks[:len(blocks)-1] { // the last is incomplete
		var e sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "":
				comments++
			case "id":
				e.id = value
			case "event":
				e.kind = value
			case "data":
				e.data = value
			default:
				t.Errorf("unexpected SSE line %q", line)
			}
		}
		if e.kind != "" {
			events = append(events, e)
		}
	}
	return events, comments
}

func sseRequest(t *testing.T, ctx context.Context, url string, hdr ...string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func TestEventsSSEFraming(t *testing.T) {
	f := newFixture(t)
	publishSome(f)
	s := openStream(t, f.hc, sseRequest(t, t.Context(), f.url+"/v1/events?since=3"))
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	s.waitFor(t, "id: 5\n")

	// Live events follow the backlog.
	live := f.ev.Publish(program.KindBackoff, "web:1", program.Backoff{MS: 1000, CrashCount: 1, Reason: program.ReasonCrash})
	s.waitFor(t, "id: 6\n")
	s.waitFor(t, ": keepalive\n\n")

	events, comments := parseSSE(t, s.String())
	if comments == 0 {
		t.Error("no keepalive comment")
	}
	var ids []string
	for _, e := range events {
		ids = append(ids, e.id)
	}
	if want := []string{"4", "5", "6"}; !slices.Equal(ids, want) {
		t.Fatalf("ids = %v, want %v", ids, want)
	}
	data, _ := json.Marshal(live)
	wantBlock := "id: 6\nevent: backoff\ndata: " + string(data) + "\n\n"
	if !strings.Contains(s.String(), wantBlock) {
		t.Errorf("stream %q does not contain %q", s.String(), wantBlock)
	}
	var got program.Event
	if err := json.Unmarshal([]byte(events[0].data), &got); err != nil || got.Kind != program.KindExited || got.ID != "web:1" {
		t.Errorf("first event %+v, %v", got, err)
	}
}

func TestEventsSSEResumeAndFilter(t *testing.T) {
	f := newFixture(t)
	publishSome(f)
	// Last-Event-ID wins over since=, as an EventSource reconnecting keeps
	// the URL it was opened with.
	s := openStream(t, f.hc, sseRequest(t, t.Context(), f.url+"/v1/events?since=0&kinds=spawned", "Last-Event-ID", "2"))
	s.waitFor(t, "id: 5\n")
	events, _ := parseSSE(t, s.String())
	if len(events) != 2 || events[0].id != "3" || events[1].id != "5" {
		t.Errorf("resumed events = %+v, want spawned 3 and 5", events)
	}
}

func TestEventsSSECutoff(t *testing.T) {
	f := newFixture(t)
	publishSome(f)
	s := openStream(t, f.hc, sseRequest(t, t.Context(), f.url+"/v1/events"))
	s.waitFor(t, "id: 5\n")
	f.ev.CutOffAll()
	testutil.Eventually(t, "the stream to end", s.ended)
	want := "event: cutoff\ndata: {\"error\":\"slow subscriber cut off; reconnect with Last-Event-ID\"}\n\n"
	if !strings.HasSuffix(s.String(), want) {
		t.Errorf("stream ends %q, want %q", s.String(), want)
	}
}

func TestEventsSSEEnds(t *testing.T) {
	f := newFixture(t)
	// The client leaving ends the subscription.
	ctx, cancel := context.WithCancel(t.Context())
	openStream(t, f.hc, sseRequest(t, ctx, f.url+"/v1/events"))
	testutil.Eventually(t, "subscription", func() bool { return f.ev.Subscribers() == 1 })
	cancel()
	testutil.Eventually(t, "the subscription to close", func() bool { return f.ev.Subscribers() == 0 })

	// Close ends every stream.
	s := openStream(t, f.hc, sseRequest(t, t.Context(), f.url+"/v1/events"))
	testutil.Eventually(t, "subscription", func() bool { return f.ev.Subscribers() == 1 })
	f.srv.Close()
	testutil.Eventually(t, "the stream to end on Close", s.ended)
	testutil.Eventually(t, "the subscription to close", func() bool { return f.ev.Subscribers() == 0 })
}

func TestEventsOverUnixSocket(t *testing.T) {
	srv, _, ev := newServer(t)
	path := serveUnix(t, srv)
	ev.Publish(program.KindSpawned, "web:0", program.Spawned{PID: 1, Run: 1})
	s := openStream(t, unixClient(path), sseRequest(t, t.Context(), "http://tend/v1/events"))
	s.waitFor(t, "id: 1\nevent: spawned\n")
	ev.Publish(program.KindSpawned, "web:1", program.Spawned{PID: 2, Run: 1})
	s.waitFor(t, "id: 2\nevent: spawned\n")
	// Close of a server on a socket ends the stream too and returns.
	srv.Close()
	testutil.Eventually(t, "the stream to end on Close", s.ended)
}
