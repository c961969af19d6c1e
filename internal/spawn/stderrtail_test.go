package spawn

import (
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/logfile"
)

// TestSayings: the lines of an agent's stderr a why quotes are its last
// sentences, not the dump of a request or a stack that follows them.
func TestSayings(t *testing.T) {
	claude := "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n\n" +
		"Error handling request {\n  jsonrpc: '2.0',\n  id: 2,\n  method: 'session/new',\n  params: { cwd: '/tmp', mcpServers: [] }\n} {\n" +
		"  code: -32603,\n  message: 'Internal error',\n  data: { details: 'Query closed before response received' }\n}\n"
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{claude, 2, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"},
		{"starting\nError: no model configured\n    at main (/x.js:1:2)\n    at run (/x.js:3:4)\n", 2, "starting ⏎ Error: no model configured"},
		{"one\ntwo\nthree", 1, "three"},
		{"", 2, ""},
		{"\n\n  \n}\n", 2, ""},
		{strings.Repeat("x", 300) + "\n", 1, strings.Repeat("x", 200) + "…"},
		{strings.Repeat("y", errTailMax-3) + "\nok\n", 2, "ok"}, // the first line was cut by the bound
	}
	for _, c := range cases {
		if got := sayings(c.in, c.n); got != c.want {
			t.Errorf("sayings(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestKeepTail: a protocol run's stderr is kept to its newest errTailMax
// bytes; other streams and other programs keep nothing.
func TestKeepTail(t *testing.T) {
	o := &Output{protocol: true}
	o.keepTailLocked(logfile.Stdout, []byte("stdout"))
	if len(o.errTail) != 0 {
		t.Fatalf("stdout kept: %q", o.errTail)
	}
	for i := 0; i < 10; i++ {
		o.keepTailLocked(logfile.Stderr, []byte(strings.Repeat(string(rune('a'+i)), 1000)))
	}
	if len(o.errTail) != errTailMax || o.errTail[len(o.errTail)-1] != 'j' || o.errTail[0] != 'f' {
		t.Fatalf("tail of %d bytes from %c to %c", len(o.errTail), o.errTail[0], o.errTail[len(o.errTail)-1])
	}
	plain := &Output{}
	plain.keepTailLocked(logfile.Stderr, []byte("x"))
	if plain.errTail != nil {
		t.Fatal("a program without protocol kept its stderr")
	}
}
