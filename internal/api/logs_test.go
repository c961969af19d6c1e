package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/testutil"
)

// writeLines writes lines "line 0".."line n-1" to path after a sparse run
// of prefix zero bytes, which makes the file big without costing the test
// time to write it.
func writeLines(t *testing.T, path string, n int, prefix int64) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b.Bytes(), prefix); err != nil {
		t.Fatal(err)
	}
}

func TestLogsTail(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.b.LogDir, "web:0.log")
	// 50 MiB, and lines over 1 MiB: far more than the chunk the tail reads
	// at a time.
	writeLines(t, path, 200000, 50<<20)

	for _, tc := range []struct {
		query string
		lines int
		first int // the number of the first line expected
	}{
		{"", 100, 200000 - 100},
		{"?tail=3", 3, 200000 - 3},
		{"?tail=0", 0, 0},
		{"?tail=100000", 100000, 100000},
		{"?tail=150000", 100000, 100000}, // capped
	} {
		code, body := f.do(t, "GET", "/v1/logs/web:0"+tc.query, "")
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.query, code, body[:min(len(body), 200)])
		}
		got := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		if body == "" {
			got = nil
		}
		if len(got) != tc.lines {
			t.Errorf("%s: %d lines, want %d", tc.query, len(got), tc.lines)
			continue
		}
		if tc.lines > 0 {
			if want := fmt.Sprintf("line %d", tc.first); got[0] != want {
				t.Errorf("%s: first line %.20q, want %q", tc.query, got[0], want)
			}
			if last := got[len(got)-1]; last != "line 199999" {
				t.Errorf("%s: last line %.20q", tc.query, last)
			}
		}
	}
}

func TestLogsErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/v1/logs/web:0?tail=-1", 400, "tail="},
		{"/v1/logs/web:0?tail=ten", 400, "tail="},
		{"/v1/logs/web:0?follow=perhaps", 400, "follow="},
		{"/v1/logs/nope:0", 404, "no such"},
		{"/v1/logs/nope", 404, "no such"},
		{"/v1/logs/Bad!", 404, "bad id"},
		{"/v1/logs/web:0?since=yesterday", 400, "since="},
		{"/v1/logs/web:0?since=-5m", 400, "since="},
		{"/v1/logs/web:0?stderr=maybe", 400, "stderr="},
		{"/v1/logs/web:0?timestamps=2", 400, "timestamps="},
		{"/v1/logs/web:1", 200, ""}, // nothing written yet: empty
		{"/v1/logs/web", 200, ""},
	} {
		code, body := f.do(t, "GET", tc.path, "")
		if code != tc.code || !strings.Contains(body, tc.body) || (tc.code == 200 && body != "") {
			t.Errorf("%s = %d %q, want %d with %q", tc.path, code, body, tc.code, tc.body)
		}
	}
}

// stream reads a streaming response in the background.
type stream struct {
	mu   sync.Mutex // guards buf and done
	buf  bytes.Buffer
	done bool
	resp *http.Response
}

func openStream(t *testing.T, hc *http.Client, req *http.Request) *stream {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{resp: resp}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			if err != nil {
				s.done = true
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *stream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *stream) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *stream) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%q in stream", want), func() bool { return strings.Contains(s.String(), want) })
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.WriteString(f, text); err != nil {
		t.Fatal(err)
	}
}

func TestLogsFollow(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.b.LogDir, "web:0.log")
	writeLines(t, path, 10, 0)
	req, _ := http.NewRequest("GET", f.url+"/v1/logs/web:0?tail=2&follow=1", nil)
	s := openStream(t, f.hc, req)
	s.waitFor(t, "line 9\n")
	if got := s.String(); got != "line 8\nline 9\n" {
		t.Errorf("tail before follow = %q", got)
	}

	appendTo(t, path, "appended 1\n")
	s.waitFor(t, "appended 1\n")

	// Rotation by another writer: the last bytes go to the old file,
	// which is renamed, and a new file takes its place.
	appendTo(t, path, "last of old\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, "first of new\n")
	s.waitFor(t, "first of new\n")
	appendTo(t, path, "second of new\n")
	s.waitFor(t, "second of new\n")

	// Truncation: read again from the start.
	if err := os.WriteFile(path, []byte("after truncate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "after truncate\n")

	want := "line 8\nline 9\nappended 1\nlast of old\nfirst of new\nsecond of new\nafter truncate\n"
	if got := s.String(); got != want {
		t.Errorf("followed output:\n%s\nwant:\n%s", got, want)
	}

	// Close ends the response instead of waiting for the client.
	f.srv.Close()
	testutil.Eventually(t, "follow to end on Close", s.ended)
}

func TestLogsFollowFileAppearsLater(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest("GET", f.url+"/v1/logs/web:1?follow=1", nil)
	s := openStream(t, f.hc, req)
	appendTo(t, filepath.Join(f.b.LogDir, "web:1.log"), "hello\n")
	s.waitFor(t, "hello\n")
}

// record writes one record to id's log in the fake.
func record(t *testing.T, f *fixture, id string, ts time.Time, s logfile.Stream, line string) {
	t.Helper()
	l, err := f.b.Log(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Add(logfile.Record{TS: ts, Stream: s, Line: []byte(line)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, f *fixture, path, accept string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// The instances of a name (or all) come back merged in time order, each
// line prefixed with its instance, and in JSON with time and stream.
func TestLogsMergedAcrossInstances(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-2 * time.Hour)
	record(t, f, "web:0", old, logfile.Stdout, "long ago")
	record(t, f, "web:1", now.Add(-3*time.Second), logfile.Stderr, "one err")
	record(t, f, "web:0", now.Add(-2*time.Second), logfile.Stdout, "zero out")
	record(t, f, "planner:0", now.Add(-1500*time.Millisecond), logfile.Stdout, "planning")
	record(t, f, "web:1", now.Add(-time.Second), logfile.Stdout, "one out")
	record(t, f, "web:0", now, logfile.Stderr, "zero err")

	for _, tc := range []struct{ path, want string }{
		{"/v1/logs/web", "web:0 | long ago\nweb:1 | one err\nweb:0 | zero out\nweb:1 | one out\nweb:0 | zero err\n"},
		{"/v1/logs/web?tail=2", "web:1 | one out\nweb:0 | zero err\n"},
		{"/v1/logs/web?stderr=1", "web:1 | one err\nweb:0 | zero err\n"},
		{"/v1/logs/web?since=1h", "web:1 | one err\nweb:0 | zero out\nweb:1 | one out\nweb:0 | zero err\n"},
		{"/v1/logs/web?since=" + url.QueryEscape(now.Add(-time.Second).Format(time.RFC3339Nano)), "web:1 | one out\nweb:0 | zero err\n"},
		{"/v1/logs/web:0", "long ago\nzero out\nzero err\n"},
		{"/v1/logs/all?tail=3", "planner:0 | planning\nweb:1 | one out\nweb:0 | zero err\n"},
		{"/v1/logs/web:0?tail=1&timestamps=1", now.Format("2006-01-02T15:04:05.000Z") + " zero err\n"},
		{"/v1/logs/web?tail=1&timestamps=1", "web:0 | " + now.Format("2006-01-02T15:04:05.000Z") + " zero err\n"},
	} {
		if got := get(t, f, tc.path, ""); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.path, got, tc.want)
		}
	}

	body := get(t, f, "/v1/logs/web?tail=3", "application/json")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		got = append(got, m)
	}
	want := []map[string]any{
		{"ts": now.Add(-2 * time.Second).Format("2006-01-02T15:04:05.000Z"), "id": "web:0", "stream": "stdout", "line": "zero out"},
		{"ts": now.Add(-time.Second).Format("2006-01-02T15:04:05.000Z"), "id": "web:1", "stream": "stdout", "line": "one out"},
		{"ts": now.Format("2006-01-02T15:04:05.000Z"), "id": "web:0", "stream": "stderr", "line": "zero err"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON lines:\n%v\nwant:\n%v", got, want)
	}
}

// Following a name streams every new line of each of its instances,
// merged, in JSON when asked.
func TestLogsFollowMergedJSON(t *testing.T) {
	f := newFixture(t)
	record(t, f, "web:0", time.Now(), logfile.Stdout, "before")
	req, _ := http.NewRequest("GET", f.url+"/v1/logs/web?tail=1&follow=1", nil)
	req.Header.Set("Accept", "application/json")
	s := openStream(t, f.hc, req)
	s.waitFor(t, `"line":"before"`)
	record(t, f, "web:1", time.Now(), logfile.Stderr, "from one")
	s.waitFor(t, `"line":"from one"`)
	record(t, f, "web:0", time.Now(), logfile.Stdout, "from zero")
	s.waitFor(t, `"line":"from zero"`)
	lines := strings.Split(strings.TrimSuffix(s.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `"id":"web:1","stream":"stderr"`) || !strings.Contains(lines[2], `"id":"web:0","stream":"stdout"`) {
		t.Errorf("followed:\n%s", s.String())
	}
}
