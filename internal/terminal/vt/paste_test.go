package vt

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// issuePaste is the paste of docs/trust.md: one pass removing the end
// marker leaves "ESC[201~" behind, ending the paste, and what follows is
// typed, newline and all.
const issuePaste = "harmless \x1b[20\x1b[201~1~; touch "

func TestPasteRemovesEscAndC1(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\nline 2\ttab", "plain text\nline 2\ttab"},
		{issuePaste + "x", "harmless [20[201~1~; touch x"},
		{"a\x1b[201~b", "a[201~b"},
		{"csi \u009b201~ and \u0085 nel", "csi 201~ and  nel"},
		{"raw \x9b201~ \x80\x9f", "raw 201~ "},
		{"é € 中 😀 \u00a0 \ufffd", "é € 中 😀 \u00a0 \ufffd"}, // continuation bytes 0x80-0x9f inside runes stay
		{"bad \xff \xc3", "bad \xff \xc3"},
	} {
		got := Input{Text: c.in}.Encode(true, false)
		if want := pasteStart + c.want + pasteEnd; string(got) != want {
			t.Errorf("paste of %q:\n got %q\nwant %q", c.in, got, want)
		}
	}
	// Without bracketed paste the text is typed as written: --literal and
	// programs that never asked for a paste get every byte.
	if got := (Input{Text: "a\x1bb"}).Encode(false, false); string(got) != "a\x1bb" {
		t.Errorf("typed text = %q", got)
	}
}

// FuzzPaste: whatever the text, the paste is one start marker, text with
// no ESC and no C1 control (as a rune or as a stray byte), one end marker.
func FuzzPaste(f *testing.F) {
	for _, s := range []string{issuePaste + "/tmp/x\n", "\x1b[201~", "\x1b\x1b[201~[201~", "\u009b201~", "\xc2\x9b", "\x9b", "é\x80", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		b := AppendPaste(nil, text)
		if !bytes.HasPrefix(b, []byte(pasteStart)) || !bytes.HasSuffix(b, []byte(pasteEnd)) || len(b) < len(pasteStart)+len(pasteEnd) {
			t.Fatalf("not wrapped: %q", b)
		}
		inner := b[len(pasteStart) : len(b)-len(pasteEnd)]
		for i := 0; i < len(inner); {
			r, n := utf8.DecodeRune(inner[i:])
			switch {
			case inner[i] == 0x1b:
				t.Fatalf("ESC at %d in %q", i, inner)
			case r >= 0x80 && r <= 0x9f:
				t.Fatalf("C1 U+%04X at %d in %q", r, i, inner)
			case r == utf8.RuneError && n == 1 && inner[i] >= 0x80 && inner[i] <= 0x9f:
				t.Fatalf("raw C1 byte %#x at %d in %q", inner[i], i, inner)
			}
			i += n
		}
		if len(inner) > len(text) {
			t.Fatalf("the paste grew: %q from %q", inner, text)
		}
	})
}
