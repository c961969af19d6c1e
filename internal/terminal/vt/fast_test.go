package vt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// tokens are what the differential tests build their input from: mostly
// plain text and the controls the fast path takes, between the sequences
// and characters it leaves to the parser (each one's state matters to it:
// insert mode, no auto-wrap, line drawing, regions, the pen, wide and
// joined characters, a sequence or a UTF-8 character cut open).
var tokens = []string{
	"a", "hello", "0123456789", "the quick brown fox jumps over the lazy dog",
	strings.Repeat("x", 37), strings.Repeat("line of text ", 9), " ", "~", "}",
	"\r", "\n", "\r\n", "\r\n", "\r\n", "\b", "\b\b", "\t", "\v", "\f",
	"\x1b[31m", "\x1b[1;44m", "\x1b[0m", "\x1b[m", "\x1b[7m", "\x1b[4:3m", "\x1b[38;2;1;2;3m",
	"\x1b[4h", "\x1b[4l", "\x1b[?7l", "\x1b[?7h", "\x1b[20h", "\x1b[20l",
	"\x1b(0", "\x1b(B", "\x1b)0", "\x0e", "\x0f",
	"\x1b[2;5r", "\x1b[r", "\x1b[3;1H", "\x1b[H", "\x1b[99;99H", "\x1b[5G", "\x1b[2J", "\x1b[3J",
	"\x1b[K", "\x1b[1K", "\x1b[2@", "\x1b[3P", "\x1b[2L", "\x1b[M", "\x1b[3S", "\x1b[2T", "\x1b[4b",
	"\x1bM", "\x1bD", "\x1bE", "\x1b7", "\x1b8", "\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l",
	"\x1b[?6h", "\x1b[?6l", "\x1b[!p", "\x1bc", "\x1b#8", "\x1b[6n", "\x1b[c", "\x1b]0;title\x07",
	"中", "文字", "😀", "中\r", "中文\b\b\b", "😀\ra", "👨\u200d", "👩", "e\u0301", "\u0301", "\u200d", "é", "\u0085", "\xe4\xb8", "\xff", "\x80",
	"\x1b", "\x1b[", "\x1b[3", "\x1b]2;t", "\x1bP", "\x1b\\", "\x07", "\x00", "\x7f", "\x1b[?2026h",
}

// gen turns fuzz bytes into a stream of tokens, and cut points.
func gen(data []byte) (stream []byte, cuts []int) {
	for i, b := range data {
		if b >= 0xf0 { // a write boundary
			cuts = append(cuts, len(stream))
			continue
		}
		if b >= 0xe0 { // a raw byte, whatever it is
			if i+1 < len(data) {
				stream = append(stream, data[i+1])
			}
			continue
		}
		stream = append(stream, tokens[int(b)%len(tokens)]...)
	}
	return stream, cuts
}

// diffFastSlow feeds stream, cut at cuts, to a screen with the fast path
// and to one that sends every byte through the parser, and fails where
// they differ.
func diffFastSlow(t *testing.T, size Size, history int, stream []byte, cuts []int) {
	t.Helper()
	var screens [2]*Screen
	for i := range screens {
		s := NewScreen(size)
		s.slowOnly = i == 1
		tick := time.Unix(0, 0)
		s.SetClock(func() time.Time { tick = tick.Add(time.Second); return tick })
		s.SetHistory(history)
		screens[i] = s
	}
	fast, slow := screens[0], screens[1]
	from := 0
	feed := func(to int) {
		to = max(min(to, len(stream)), from)
		for _, s := range screens {
			s.Feed(stream[from:to])
		}
		from = to
		if got, want := state(fast), state(slow); got != want {
			t.Fatalf("after %q (of %q):\nfast path:\n%s\nparser:\n%s", stream[:to], stream, got, want)
		}
	}
	for _, c := range cuts {
		feed(c)
	}
	feed(len(stream))
}

// state is all a screen shows and keeps, as text.
func state(s *Screen) string {
	var b strings.Builder
	x, y := s.Cursor()
	fmt.Fprintf(&b, "cursor %d,%d visible %v changed %v title %q\n", x, y, s.CursorVisible(), s.ChangedAt().Unix(), s.Title())
	fmt.Fprintf(&b, "modes %+v charset %q gl %d region %d-%d alt %v last %q/%d pending utf8 %d\n",
		s.modes, s.charset[:], s.gl, s.top, s.bot, s.AltScreen(), s.last, s.lastW, s.u8n)
	fmt.Fprintf(&b, "replies %q\n", s.replies)
	for _, g := range []*grid{s.main, s.alt} {
		if g != nil {
			fmt.Fprintf(&b, "wrapped %v used %v\n", g.wrapped, g.used)
			for _, row := range g.rows { // every cell, its style and character resolved
				for _, c := range row {
					fmt.Fprintf(&b, "%q%d%v ", s.text(nil, c), c.w, s.style(c.st))
				}
				b.WriteByte('\n')
			}
		}
	}
	b.WriteString(s.Text())
	b.WriteString(s.ANSI())
	b.Write(s.Redraw(nil))
	fmt.Fprintf(&b, "\nhistory %d scrolled %d\n", s.HistoryLen(), s.hist.scrolled)
	s.hist.each(0, func(line []byte) { fmt.Fprintf(&b, "%x\n", line) }) // encoded, byte for byte
	b.WriteString(strings.Join(s.History(s.HistoryLen(), true), "\n"))
	return b.String()
}

// FuzzFastPathMatchesParser: whatever the bytes and wherever the writes
// cut them, the fast path leaves the screen exactly as the parser does.
func FuzzFastPathMatchesParser(f *testing.F) {
	f.Add([]byte{0, 9, 10, 1, 9, 10, 0xf0, 2, 12}, uint8(10), uint8(3))
	f.Add([]byte{5, 5, 5, 5, 11, 50, 5, 5, 5, 0xf5, 13, 60, 5, 5}, uint8(0), uint8(0))
	f.Add([]byte{80, 3, 81, 3, 90, 4, 0xf1, 5, 10, 5}, uint8(3), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cols, rows uint8) {
		stream, cuts := gen(data)
		diffFastSlow(t, Size{Cols: MinCols + int(cols)%40, Rows: MinRows + int(rows)%10}, 7, stream, cuts)
		// The bytes as they come, too: any sequence, cut anywhere.
		diffFastSlow(t, Size{Cols: MinCols, Rows: MinRows + 1}, 3, data, cuts)
	})
}

// TestFastPathMatchesParser is the fuzz test's check on random streams,
// run with the tests.
func TestFastPathMatchesParser(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		data := make([]byte, r.IntN(200))
		for i := range data {
			switch r.IntN(6) {
			case 0: // any byte: a raw one, a cut
				data[i] = byte(r.IntN(256))
			case 1, 2: // any token
				data[i] = byte(r.IntN(len(tokens)))
			default: // text and CR, LF
				data[i] = byte([]int{0, 1, 2, 3, 4, 5, 9, 10, 11, 12}[r.IntN(10)])
			}
		}
		stream, cuts := gen(data)
		diffFastSlow(t, Size{Cols: MinCols + r.IntN(30), Rows: MinRows + r.IntN(8)}, r.IntN(12), stream, cuts)
	}
}

// TestFastPathCases are the cases the fast path must take care of.
func TestFastPathCases(t *testing.T) {
	for _, data := range []string{
		"中\ra",                         // the right half of a wide character overwritten
		"👨\u200d\ra\x1b[Cb\rc\x1b[2Cd", // an ASCII character joins an emoji sequence open before it
		strings.Repeat("wrap around the end of the row ", 9) + "\r\n\n\n\n\n\n", // wraps and scrolls into history
		"\x1b[2;4r\x1b[4;1H" + strings.Repeat("in the region\n", 6),             // a region scrolls
		"\x1b[4habc\rX\x1b[4l\x1b[?7l" + strings.Repeat("nowrap", 5) + "\x1b(0qqq\x0eqq\x0fq",
		"\x1b[44m" + strings.Repeat("\r\n", 8) + "\x1b[m\x1b[3Sa\tb\t\tc\b\bd\v\fe",
	} {
		for cut := range len(data) {
			diffFastSlow(t, Size{Cols: 10, Rows: 5}, 4, []byte(data), []int{cut})
		}
	}
}

// TestEncodeRowMatchesEncodeLine checks the history's direct encoding of
// a row against the encoding of its resolved cells, on rows with styles,
// wide and joined characters, and trailing blanks.
func TestEncodeRowMatchesEncodeLine(t *testing.T) {
	s := NewScreen(Size{Cols: 20, Rows: 4})
	s.Feed([]byte("\x1b[31mred\x1b[0m 中文 😀 e\u0301\x1b[44m  \x1b[m  \r\n\x1b[7m \x1b[m\r\n" + strings.Repeat("x", 20) + "y"))
	for y, row := range s.main.rows {
		for used := range len(row) + 1 {
			got := s.encodeRow(nil, row, used, y%2 == 0)
			want := encodeLine(nil, s.toX(nil, row, used), y%2 == 0)
			if !bytes.Equal(got, want) {
				t.Fatalf("row %d used %d: %x, want %x", y, used, got, want)
			}
		}
	}
}
