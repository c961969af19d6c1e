package vt

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFeed feeds any bytes, cut at any point, at any size: the screen must
// not panic, must hold its invariants, and must end the same as when the
// bytes come at once.
func FuzzFeed(f *testing.F) {
	for _, tc := range stress {
		f.Add([]byte(tc.data), uint16(len(tc.data)/2), uint8(40), uint8(10))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, cols, rows uint8) {
		size := Size{Cols: MinCols + int(cols)%60, Rows: MinRows + int(rows)%30}
		whole := NewScreen(size)
		whole.SetHistory(50)
		whole.Feed(data)
		split := NewScreen(size)
		split.SetHistory(50)
		c := min(int(cut), len(data))
		split.Feed(data[:c])
		split.Feed(data[c:])
		if whole.Text() != split.Text() {
			t.Fatalf("cut at %d:\n%q\nwhole:\n%q", c, split.Text(), whole.Text())
		}
		if h, w := strings.Join(split.History(50, true), "\n"), strings.Join(whole.History(50, true), "\n"); h != w {
			t.Fatalf("cut at %d: history\n%q\nwhole:\n%q", c, h, w)
		}
		// Resized (reflowed) to another size and back, and fed again.
		other := Size{Cols: MinCols + int(cut)%50, Rows: MinRows + int(cut/50)%20}
		r := NewScreen(size)
		r.SetHistory(50)
		r.Feed(data)
		r.Resize(other)
		checkInvariants(t, r)
		r.Resize(size)
		checkInvariants(t, r)
		r.Feed(data[c:])
		checkInvariants(t, r)
		for _, s := range []*Screen{whole, split} {
			checkInvariants(t, s)
		}
		if wx, wy := whole.Cursor(); true {
			if x, y := split.Cursor(); x != wx || y != wy {
				t.Fatalf("cursor %d,%d whole, %d,%d cut at %d", wx, wy, x, y, c)
			}
		}
		// What a client would be sent must be parsed back without harm.
		r = NewScreen(size)
		r.Feed(whole.Redraw(nil))
		checkInvariants(t, r)
		l := NewTextLines(0)
		l.Write(data, func(line []byte) {
			if !utf8.Valid(line) || strings.ContainsRune(string(line), 0x1b) {
				t.Fatalf("log line %q", line)
			}
		})
	})
}

func checkInvariants(t *testing.T, s *Screen) {
	t.Helper()
	x, y := s.Cursor()
	if x < 0 || x > s.cols || y < 0 || y >= s.rows {
		t.Fatalf("cursor %d,%d outside %v", x, y, s.Size())
	}
	if s.top < 0 || s.bot >= s.rows || s.top >= s.bot {
		t.Fatalf("scroll region %d-%d in %v", s.top, s.bot, s.Size())
	}
	text := s.Text()
	if !utf8.ValidString(text) || strings.Count(text, "\n") != s.rows {
		t.Fatalf("text %q", text)
	}
	for _, l := range s.History(s.HistoryLen(), true) {
		if !utf8.ValidString(l) || strings.ContainsRune(l, '\n') {
			t.Fatalf("history line %q", l)
		}
	}
	if n := s.HistoryLen(); n > 0 && s.hist.limit == 0 {
		t.Fatalf("%d lines of history kept with none asked for", n)
	}
	for _, g := range []*grid{s.main, s.alt} {
		if g == nil || g == s.main && s.alt != nil { // the main screen keeps its size under the alternate one
			continue
		}
		if len(g.rows) != s.rows {
			t.Fatalf("%d rows", len(g.rows))
		}
		for _, row := range g.rows {
			if len(row) != s.cols {
				t.Fatalf("a row of %d cells", len(row))
			}
			if len(g.used) != len(g.rows) || len(g.wrapped) != len(g.rows) {
				t.Fatalf("row flags %d, %d for %d rows", len(g.used), len(g.wrapped), len(g.rows))
			}
			for _, c := range row {
				if int(c.st) >= max(1, len(s.styles)) || c.r < 0 && int(-c.r-1) >= len(s.clusters) {
					t.Fatalf("cell %+v points outside the tables", c)
				}
			}
		}
	}
	if len(s.styles) > s.limit || len(s.clusters) > s.limit || len(s.title) > maxTitle {
		t.Fatalf("tables %d, %d; title %d", len(s.styles), len(s.clusters), len(s.title))
	}
}
