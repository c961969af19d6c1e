package vt

import (
	"fmt"
	"strings"
	"testing"
)

// Unit tests of the history and the grid's row flags; the tmux tests
// (history_tmux_test.go) hold the whole to tmux's captures.

func TestHistoryDropsTheOldestTenthAsTmux(t *testing.T) {
	s := NewScreen(Size{Cols: 20, Rows: 3})
	s.SetHistory(20)
	for i := range 22 + 2 { // 22 lines into the history
		feedf(s, "line %d\r\n", i)
	}
	// 20 kept; the 21st dropped 2 (a tenth of 20) first, the 22nd fitted.
	if n := s.HistoryLen(); n != 20 {
		t.Fatalf("%d lines kept, want 20", n)
	}
	h := s.History(100, false)
	if h[0] != "line 2" || h[19] != "line 21" {
		t.Fatalf("history %q", h)
	}
	if got := s.History(3, false); strings.Join(got, "|") != "line 19|line 20|line 21" {
		t.Fatalf("the newest 3: %q", got)
	}
	s.SetHistory(0)
	if n := s.HistoryLen(); n != 0 {
		t.Fatalf("tty_history 0 kept %d lines", n)
	}
}

func TestHistoryPacksLines(t *testing.T) {
	s := NewScreen(Size{Cols: 80, Rows: 5})
	s.SetHistory(1000)
	for i := range 3000 {
		feedf(s, "\x1b[3%dmline %d of the history, packed with others\x1b[m\r\n", i%8, i)
	}
	if len(s.hist.blocks) == 0 || s.hist.skip == 0 && s.hist.Len() == 1000 {
		t.Fatalf("%d blocks, skip %d, %d lines", len(s.hist.blocks), s.hist.skip, s.hist.Len())
	}
	h := s.History(s.HistoryLen(), false)
	first := 3000 - 4 - len(h) // the screen holds the last 4 lines and the cursor's
	for i, l := range h {
		if want := fmt.Sprintf("line %d of the history, packed with others", first+i); l != want {
			t.Fatalf("line %d: %q, want %q", i, l, want)
		}
	}
	raw := 0
	for _, l := range h {
		raw += len(l)
	}
	if size := s.hist.size(); size*2 > raw {
		t.Errorf("%d lines of %d bytes kept in %d bytes", len(h), raw, size)
	}
	a := s.History(1, true)[0]
	if want := fmt.Sprintf("\x1b[3%dmline %d of the history, packed with others\x1b[0m", (first+len(h)-1)%8, first+len(h)-1); a != want {
		t.Errorf("ansi %q, want %q", a, want)
	}
}

func TestHistoryLineRoundTrip(t *testing.T) {
	s := NewScreen(Size{Cols: 30, Rows: 2})
	s.Feed([]byte("a\x1b[1;31m中b\x1b[0me\u0301 👨\u200d👩 \x1b[44m  \x1b[0m  x\x1b[K"))
	row, used := s.main.rows[0], int(s.main.used[0])
	line := encodeLine(nil, s.toX(nil, row, used), true)
	got := decodeX(line, nil)
	want := s.toX(nil, row, used)
	if !got.wrapped || len(got.cells) != len(want) {
		t.Fatalf("decoded %d cells (wrapped %v), want %d", len(got.cells), got.wrapped, len(want))
	}
	for i := range want {
		g, w := got.cells[i], want[i]
		if w.r == ' ' {
			w.r = 0 // a written space comes back as a blank
		}
		if g != w {
			t.Errorf("cell %d: %+v, want %+v", i, g, w)
		}
	}
	if a, b := string(decodeLine(line).appendANSI(nil)), string(s.appendRowANSI(nil, 0, true)); a != b {
		t.Errorf("ansi %q, the row's %q", a, b)
	}
	if a, b := string(decodeLine(line).appendText(nil)), s.Lines()[0]; a != b {
		t.Errorf("text %q, the row's %q", a, b)
	}
}

func TestRowsUsedAndWrappedAsTmux(t *testing.T) {
	s := NewScreen(Size{Cols: 10, Rows: 4})
	s.Feed([]byte("abc   \r\n" + strings.Repeat("x", 12) + "\x1b[1;2H\x1b[K"))
	if u := s.main.used[0]; u != 6 { // written spaces count; a partial erase keeps it
		t.Errorf("row 0 used %d, want 6", u)
	}
	if !s.main.wrapped[1] || s.main.used[1] != 10 || s.main.used[2] != 2 {
		t.Errorf("row 1 wrapped %v used %d, row 2 used %d", s.main.wrapped[1], s.main.used[1], s.main.used[2])
	}
	s.Feed([]byte("\x1b[2;5H\x1b[K")) // a partial erase to the end keeps the wrap
	if !s.main.wrapped[1] {
		t.Error("a partial erase unwrapped row 1")
	}
	s.Feed([]byte("\x1b[2;1H\x1b[K")) // the whole row: an empty line again
	if s.main.wrapped[1] || s.main.used[1] != 0 {
		t.Errorf("a whole-row erase left wrapped %v used %d", s.main.wrapped[1], s.main.used[1])
	}
	s.Feed([]byte("\x1b[4;1Hab\x1b[4;1H\x1b[@"))
	if u := s.main.used[3]; u != 10 { // insert moves cells to the row's end
		t.Errorf("row 3 used %d after ICH, want 10", u)
	}
}

func TestReflowJoinsAndSplits(t *testing.T) {
	line := func(text string, wrapped bool) xline {
		var cells []xcell
		for _, r := range text {
			cells = append(cells, xcell{r: r, w: 1})
		}
		return xline{cells: cells, wrapped: wrapped}
	}
	text := func(ls []xline) string {
		var b []string
		for _, l := range ls {
			var s []rune
			for _, c := range l.cells {
				s = append(s, c.r)
			}
			w := ""
			if l.wrapped {
				w = "+"
			}
			b = append(b, string(s)+w)
		}
		return strings.Join(b, "|")
	}
	in := []xline{line("abcde", true), line("fghij", true), line("kl", false), line("mnopqrst", false), line("", false)}
	if got, want := text(reflowLines(in, 8)), "abcdefgh+|ijkl|mnopqrst|"; got != want {
		t.Errorf("to 8: %q, want %q", got, want)
	}
	in = []xline{line("abcde", true), line("fghij", true), line("kl", false), line("mnopqrst", false)}
	if got, want := text(reflowLines(in, 3)), "abc+|def+|ghi+|jkl|mno+|pqr+|st"; got != want {
		t.Errorf("to 3: %q, want %q", got, want)
	}
}

func feedf(s *Screen, format string, args ...any) { s.Feed([]byte(fmt.Sprintf(format, args...))) }
