package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
		{"/v1/logs/Bad!", 404, "bad id"},
		{"/v1/logs/web:1", 200, ""}, // nothing written yet: empty
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
	waitFor(t, fmt.Sprintf("%q in stream", want), func() bool { return strings.Contains(s.String(), want) })
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

	// Rotation, as lumberjack does it: the last bytes go to the old file,
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
	waitFor(t, "follow to end on Close", s.ended)
}

func TestLogsFollowFileAppearsLater(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest("GET", f.url+"/v1/logs/web:1?follow=1", nil)
	s := openStream(t, f.hc, req)
	appendTo(t, filepath.Join(f.b.LogDir, "web:1.log"), "hello\n")
	s.waitFor(t, "hello\n")
}
