package cli

import (
	"strings"
	"testing"
)

// Bad input on the command line is refused with the documented exit status
// (docs/cli.md) and one clear line, and never disturbs the daemon.
func TestBadInput(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"logs", "web:0", "-n", "-5"}, 2, "-n"},
		{[]string{"logs", "web:0", "-n", "99999999999999999999"}, 2, "-n"},
		{[]string{"logs", "../x"}, 3, "../x"},
		{[]string{"logs", "web:0/../../secret"}, 3, "secret"},
		{[]string{"status", "../x"}, 3, "../x"},
		{[]string{"status", "%2e%2e"}, 3, "%2e%2e"},
		{[]string{"status", "web:0\x00"}, 3, "web:0"},
		{[]string{"status", "web\xff:0"}, 3, "web"},
		{[]string{"restart", "../web"}, 3, "../web"},
		{[]string{"rm", "../web"}, 3, "../web"},
		{[]string{"events", "--since", "-1"}, 2, "--since"},
		{[]string{"events", "--since", "18446744073709551616"}, 2, "--since"},
		{[]string{"events", "--id", "../x"}, 2, "../x"},
		{[]string{"wait", "web:0", "--until", "bogus"}, 2, "bogus"},
		{[]string{"wait", "../x", "--until", "running", "--timeout", "1s"}, 3, "../x"},
		{[]string{"add", "Bad Name", "--", "true"}, 2, "Bad Name"},
		{[]string{"add", "../x", "--", "true"}, 2, "../x"},
		{[]string{"add", "ok", "--instances", "-1", "--", "true"}, 2, "instances"},
		{[]string{"add", "ok", "--restart", "sometimes", "--", "true"}, 2, "sometimes"},
		{[]string{"doctor", "--since", "-1h"}, 2, "since"},
	} {
		r := d.tend(t, tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, "tend: ") || !strings.Contains(r.stderr, tc.msg) ||
			strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("tend %q: exit %d, stdout %q, stderr %q; want exit %d and one line with %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.msg)
		}
	}
	// None of it changed the daemon, which still answers.
	if calls := d.b.Calls(); len(calls) != 0 {
		t.Errorf("bad input reached the daemon's actions: %q", calls)
	}
	if r := d.tend(t, "status", "web:0"); r.code != 0 {
		t.Errorf("status after the bad input: exit %d %q", r.code, r.stderr)
	}
}
