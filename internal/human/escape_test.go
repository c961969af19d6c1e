package human

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/program"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, cell, text string }{
		{"plain text, é 中 😀", "plain text, é 中 😀", "plain text, é 中 😀"},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"\x1b]52;c;ZWNobyBoaQ==\a", `\x1b]52;c;ZWNobyBoaQ==\x07`, `\x1b]52;c;ZWNobyBoaQ==\x07`},
		{"\x1b]0;pwned\x1b\\", `\x1b]0;pwned\x1b\`, `\x1b]0;pwned\x1b\`},
		{"\x00\x7f", `\x00\x7f`, `\x00\x7f`},
		{"csi \u009b2J nel \u0085", `csi \u009b2J nel \u0085`, `csi \u009b2J nel \u0085`},
		{"raw \x9b2J \xff", `raw \x9b2J \xff`, `raw \x9b2J \xff`},
		{"ok \u202egnp.exe \u2066x\u2069 \u200e\u200f\u061c", `ok \u202egnp.exe \u2066x\u2069 \u200e\u200f\u061c`, `ok \u202egnp.exe \u2066x\u2069 \u200e\u200f\u061c`},
	} {
		if got := Escape(c.in); got != c.cell {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.cell)
		}
		if got := EscapeText(c.in); got != c.text {
			t.Errorf("EscapeText(%q) = %q, want %q", c.in, got, c.text)
		}
	}
	for in, want := range map[string]string{
		"\x1b[1;31mred\x1b[0m \x1b[38:2::1:2:3mtrue\x1b[m": "\x1b[1;31mred\x1b[0m \x1b[38:2::1:2:3mtrue\x1b[m",
		"\x1b[2J\x1b[?1049h\x1b[>4;1m":                     `\x1b[2J\x1b[?1049h\x1b[>4;1m`,
		"\x1b]52;c;eA==\a\x1b[31":                          `\x1b]52;c;eA==\x07\x1b[31`,
		"line\n\ttab\r\n":                                  "line\n\ttab\\r\n",
		"\u009b31m \x9b31m":                                `\u009b31m \x9b31m`,
	} {
		if got := EscapeColour(in); got != want {
			t.Errorf("EscapeColour(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write([]byte("ok\n"))
	w.Write([]byte("status \x1b]0;t\a\n"))
	if want := "ok\nstatus \\x1b]0;t\\x07\n"; b.String() != want {
		t.Errorf("NewWriter wrote %q, want %q", b.String(), want)
	}
}

// TestTableEscapesCells: a why, a label or an id with controls (a
// newline and tab too) is one escaped cell, the columns in line.
func TestTableEscapesCells(t *testing.T) {
	list := []program.Status{
		{ID: "evil:0", State: "running", Lifecycle: "ok", Why: "up \x1b]52;c;aGk=\a\nfake:1  running", Labels: map[string]string{"k": "\u202eval\u0085"}},
		{ID: "plain:0", State: "stopped", Lifecycle: "ok", Why: "stopped"},
	}
	var b bytes.Buffer
	if err := TableWith(&b, list, 300, TableOptions{Labels: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	checkClean(t, out, true)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out)
	}
	for _, want := range []string{`up \x1b]52;c;aGk=\x07\nfake:1  running`, `k=\u202eval\u0085`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if i, j := strings.Index(lines[0], "WHY"), strings.Index(lines[1], "up "); i != j {
		t.Errorf("WHY at %d, the why at %d:\n%s", i, j, out)
	}
}

// checkClean fails unless s is valid UTF-8 without a control a terminal
// acts on: no byte below 0x20 but newline and tab (when lines), no DEL,
// no C1 (as a byte or a rune), no bidirectional control.
func checkClean(t *testing.T, s string, lines bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("not UTF-8: %q", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && !(lines && (c == '\n' || c == '\t')) || c == 0x7f {
			t.Fatalf("byte %#x at %d in %q", c, i, s)
		}
	}
	for i, r := range s {
		if r >= 0x7f && r <= 0x9f || isControlRune(r) {
			t.Fatalf("rune %U at %d in %q", r, i, s)
		}
	}
}

// FuzzHuman: whatever a program writes, what the human forms print holds
// no control a terminal acts on, and clean text is left as it is.
func FuzzHuman(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;aGk=\a", "\x1b[31mred\x1b[0m", "\u009b2J", "\x9b", "\xc2", "\u202e", "a\nb\tc", "\x1b[", "\x1b[1;2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cell, text, colour := Escape(s), EscapeText(s), EscapeColour(s)
		checkClean(t, cell, false)
		checkClean(t, text, true)
		// EscapeColour keeps SGR sequences and nothing else with an ESC.
		checkClean(t, sgrRE(colour), true)
		if j, err := json.Marshal(s); err == nil {
			var back, want string
			json.Unmarshal(j, &want)
			if err := json.Unmarshal(EscapeJSON(j), &back); err != nil || back != want {
				t.Fatalf("EscapeJSON changed %q: %q, %v", s, back, err)
			}
			checkClean(t, string(EscapeJSON(j)), false)
		}
		if clean(s, false) && cell != s || clean(s, true) && text != s {
			t.Fatalf("clean text changed: %q", s)
		}
		if Escape(cell) != cell || EscapeText(text) != text {
			t.Fatalf("escaping twice changed %q", s)
		}
		var b bytes.Buffer
		if err := Table(&b, []program.Status{{ID: s, State: s, Why: s}}, 80); err != nil {
			t.Fatal(err)
		}
		checkClean(t, b.String(), true)
		if n := strings.Count(b.String(), "\n"); n != 2 {
			t.Fatalf("a one-row table has %d lines:\n%s", n, b.String())
		}
	})
}

// sgrRE removes the SGR sequences of s.
func sgrRE(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, 0x1b)
		if i < 0 {
			return b.String() + s
		}
		b.WriteString(s[:i])
		n := sgrLen(s[i:])
		if n == 0 {
			n = 1
			b.WriteByte(0x1b) // not an SGR: checkClean fails on it
		}
		s = s[i+n:]
	}
}

func TestEscapeJSON(t *testing.T) {
	in := map[string]string{"why": "a\u009bb \u202ec é中 \x7f\x1b]0;t\a"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := EscapeJSON(raw)
	checkClean(t, string(got), false)
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["why"] != in["why"] {
		t.Fatalf("EscapeJSON changed the value: %q, %v", back, err)
	}
	if plain := []byte(`{"a":"é"}`); &EscapeJSON(plain)[0] != &plain[0] {
		t.Errorf("clean JSON was copied")
	}
}
