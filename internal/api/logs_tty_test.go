package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
)

// A terminal's log is shown as text, one line per line, control sequences
// gone, a line redrawn in place as it was left, a prompt waiting as the
// last line; raw=1 gives the bytes the program wrote; a tail counts lines
// of text, not records.
func TestLogsOfATerminal(t *testing.T) {
	f := newFixture(t)
	f.b.TTY = map[string]bool{"web:0": true}
	l, err := f.b.Log("web:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	for i, r := range []struct {
		line    string
		partial bool
	}{
		{"$ ", true}, {"l", true}, {"s", true}, {"\r", false},
		{"a  b\r", false},
		{"\x1b[1m50%\r100%\x1b[0m", true}, {"\r", false},
		{"\x1b]0;title\a\x1b[32mgreen\x1b[0m\r", false},
		{"> ", true},
	} {
		if err := l.Add(logfile.Record{TS: ts.Add(time.Duration(i) * time.Millisecond), Stream: logfile.TTY, Partial: r.partial, Line: []byte(r.line)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"", "$ ls\na  b\n100%\ngreen\n> \n"},
		{"?tail=2", "green\n> \n"},
		{"?raw=1", "$ ls\r\na  b\r\n\x1b[1m50%\r100%\x1b[0m\r\n\x1b]0;title\a\x1b[32mgreen\x1b[0m\r\n> "},
		{"?timestamps=1&tail=1", "2026-12-03T01:02:03.008Z > \n"},
	} {
		code, body := f.do(t, "GET", "/v1/logs/web:0"+tc.query, "")
		if code != 200 || body != tc.want {
			t.Errorf("%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
	code, body := f.do(t, "GET", "/v1/logs/web:0?format=json&tail=2", "")
	if code != 200 || !strings.Contains(body, `"stream":"tty","line":"green"`) || !strings.Contains(body, `"line":"\u003e ","partial":true`) {
		t.Errorf("json: %d %s", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/logs/web:0?raw=maybe", ""); code != 400 || !strings.Contains(body, "raw=") {
		t.Errorf("raw=maybe: %d %s", code, body)
	}
}
