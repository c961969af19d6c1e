package logfile

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

type piece struct {
	line    string
	partial bool
}

func feedAll(max int, chunks ...string) []piece {
	l := Lines{Max: max}
	var got []piece
	emit := func(line []byte, partial bool) { got = append(got, piece{string(line), partial}) }
	for _, c := range chunks {
		l.Feed([]byte(c), emit)
	}
	l.End(emit)
	return got
}

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		max    int
		chunks []string
		want   []piece
	}{
		{8, []string{"a\nb\n"}, []piece{{"a", false}, {"b", false}}},
		{8, []string{"he", "llo\nwor", "ld\n"}, []piece{{"hello", false}, {"world", false}}},
		{8, []string{"\n\n"}, []piece{{"", false}, {"", false}}},
		{4, []string{"abcdefghij\n"}, []piece{{"abcd", true}, {"efgh", true}, {"ij", false}}},
		{4, []string{"ab", "cd", "\n"}, []piece{{"abcd", false}}},
		{4, []string{"ab", "cd", "e\n"}, []piece{{"abcd", true}, {"e", false}}},
		{4, []string{"no newline"}, []piece{{"no n", true}, {"ewli", true}, {"ne", true}}},
		{0, []string{"unbounded " + strings.Repeat("x", 100) + "\n"}, []piece{{"unbounded " + strings.Repeat("x", 100), false}}},
	} {
		got := feedAll(tc.max, tc.chunks...)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("max %d %q: %v, want %v", tc.max, tc.chunks, got, tc.want)
		}
	}
}

// FuzzLines: no piece is longer than Max or holds a newline, and the
// pieces with a newline after each complete one give back the input.
func FuzzLines(f *testing.F) {
	f.Add([]byte("a\nbb\nccc"), uint8(2), uint8(3))
	f.Add([]byte("\n\n\n"), uint8(1), uint8(1))
	f.Add([]byte(strings.Repeat("x", 40)+"\n"), uint8(7), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, max, split uint8) {
		if max == 0 {
			max = 1
		}
		l := Lines{Max: int(max)}
		var out bytes.Buffer
		emit := func(line []byte, partial bool) {
			if len(line) > int(max) || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("piece %q (max %d)", line, max)
			}
			out.Write(line)
			if !partial {
				out.WriteByte('\n')
			}
		}
		for rest := data; len(rest) > 0; {
			n := min(len(rest), int(split)+1)
			l.Feed(rest[:n], emit)
			rest = rest[n:]
		}
		l.End(emit)
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("pieces give %q, want %q", out.Bytes(), data)
		}
	})
}
