package api

import (
	"strings"
	"testing"
)

// naiveTail is the obvious tail: split into lines, keep the last n.
func naiveTail(s string, n int) string {
	if n == 0 || s == "" {
		return ""
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if n < len(lines) {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

func TestTailOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},      // a last line without newline counts
		{"a\nb\nc", 2, "b\nc"},   //
		{"\n\n\n", 2, "\n\n"},    // empty lines are lines
		{"only\n", 5, "only\n"},  //
		{"x\n\ny\n", 2, "\ny\n"}, //
		{"no newline", 1, "no newline"},
	} {
		for _, chunk := range []int{1, 2, 3, 64 << 10} {
			r := strings.NewReader(tc.in)
			off, err := tailOffset(r, int64(len(tc.in)), tc.n, chunk)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.in[off:]; got != tc.want {
				t.Errorf("tail(%q, %d) chunk %d = %q, want %q", tc.in, tc.n, chunk, got, tc.want)
			}
		}
	}
}

func FuzzTailOffset(f *testing.F) {
	f.Add("a\nb\nc\n", uint8(2), uint8(1))
	f.Add("a\n\n\nb", uint8(3), uint8(2))
	f.Add("", uint8(1), uint8(5))
	f.Add("\n", uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, s string, n, chunk uint8) {
		if chunk == 0 {
			chunk = 1
		}
		off, err := tailOffset(strings.NewReader(s), int64(len(s)), int(n), int(chunk))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s[off:], naiveTail(s, int(n)); got != want {
			t.Fatalf("tail(%q, %d) chunk %d = %q, want %q", s, n, chunk, got, want)
		}
	})
}
