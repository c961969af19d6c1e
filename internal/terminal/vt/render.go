package vt

import (
	"strconv"
	"strings"
	"time"
)

// Text is the screen as plain text: one line per row, trailing spaces
// trimmed, as `tmux capture-pane -p` prints a pane. Every row is there,
// blank ones included, each ending in a newline.
func (s *Screen) Text() string {
	var b []byte
	for y := range s.rows {
		b = s.appendRowText(b, y)
		b = append(b, '\n')
	}
	return string(b)
}

// Lines is Text cut into its rows.
func (s *Screen) Lines() []string {
	lines := make([]string, s.rows)
	var b []byte
	for y := range s.rows {
		b = s.appendRowText(b[:0], y)
		lines[y] = string(b)
	}
	return lines
}

// appendRowText appends row y's text without its trailing spaces.
func (s *Screen) appendRowText(b []byte, y int) []byte {
	start := len(b)
	for _, c := range s.g.rows[y] {
		switch {
		case c.w == 0:
		case c.r == 0:
			b = append(b, ' ')
		default:
			b = s.text(b, c)
		}
	}
	end := len(b)
	for end > start && b[end-1] == ' ' {
		end--
	}
	return b[:end]
}

// ANSI is the screen as text with its colours and attributes as SGR
// sequences, one line per row, each line ending in a reset: for printing
// on a terminal (`tend screen --ansi`), not for replaying.
func (s *Screen) ANSI() string {
	var b []byte
	for y := range s.rows {
		b = s.appendRowANSI(b, y, true)
		b = append(b, '\n')
	}
	return string(b)
}

// appendRowANSI appends row y with its styles, from and back to the
// default style. With trim, trailing blank cells in the default background
// are left out.
func (s *Screen) appendRowANSI(b []byte, y int, trim bool) []byte {
	row := s.g.rows[y]
	end := len(row)
	if trim {
		for end > 0 && row[end-1].r == 0 && s.style(row[end-1].st).Bg == 0 && s.style(row[end-1].st).Attrs&(attrReverse|attrUnderlineMask|attrStrike|attrOverline) == 0 {
			end--
		}
	}
	var pen style
	for x, c := range row[:end] {
		// A half of a wide character whose other half was overwritten is
		// drawn as a blank, so the columns after it stay in place.
		if c.w == 0 && x > 0 && row[x-1].w == 2 {
			continue
		}
		st := s.style(c.st)
		b = appendSGR(b, pen, st)
		pen = st
		if c.r == 0 || c.w == 0 || c.w == 2 && (x+1 >= len(row) || row[x+1].w != 0) {
			b = append(b, ' ')
		} else {
			b = s.text(b, c)
		}
	}
	return appendSGR(b, pen, style{})
}

// History returns up to n of the newest lines of the history (the lines
// that scrolled off the top of the main screen), oldest first, as Lines
// returns rows: `tmux capture-pane -p -S -n` prints them above the
// screen. With ansi, with their colours and attributes, as ANSI's rows.
func (s *Screen) History(n int, ansi bool) []string {
	n = min(max(n, 0), s.hist.Len())
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	var b []byte
	s.hist.each(s.hist.Len()-n, func(line []byte) {
		d := decodeLine(line)
		if ansi {
			b = d.appendANSI(b[:0])
		} else {
			b = d.appendText(b[:0])
		}
		out = append(out, string(b))
	})
	return out
}

// HistoryLen is the number of lines in the history.
func (s *Screen) HistoryLen() int { return s.hist.Len() }

// Snapshot is the screen as the API shows it.
type Snapshot struct {
	Cols      int       `json:"cols"`
	Rows      int       `json:"rows"`
	Cursor    Point     `json:"cursor"`
	Lines     []string  `json:"lines"` // Text's rows
	Title     string    `json:"title"`
	ChangedAt time.Time `json:"changed_at"`
}

// Point is a cell's column and row, from 0.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Snapshot returns the screen's state now.
func (s *Screen) Snapshot() Snapshot {
	return Snapshot{
		Cols: s.cols, Rows: s.rows,
		Cursor:    Point{X: s.x, Y: s.y},
		Lines:     s.Lines(),
		Title:     s.title,
		ChangedAt: s.changedAt,
	}
}

// Redraw appends to b the bytes that make a terminal of the screen's size
// show this screen, whatever it showed before: the main screen's content,
// the alternate screen's over it when that is in use, the scroll region,
// the modes a program's input depends on (cursor keys, keypad, bracketed
// paste, mouse reporting, focus events), the title, the saved cursor, the
// cursor and the pen. A client that attaches, or one that fell behind,
// gets this and then the program's output from that point on.
//
// What a redraw cannot carry: a pending wrap (the cursor after a write in
// the last column shows in that column), tab stops other than every
// eight columns, and the charsets' G1.
func (s *Screen) Redraw(b []byte) []byte {
	b = append(b, "\x1b[?2026h"...) // hold the frame until it is complete, where supported
	b = append(b, "\x1b[?1049l\x1b[0m\x1b[r\x1b[?6l\x1b[4l\x1b[?7h\x1b(B\x0f"...)
	b = s.paint(b, s.main, s.saved[0])
	if s.alt != nil {
		b = append(b, "\x1b[?1049h"...)
		b = s.paint(b, s.alt, s.saved[1])
	}
	b = append(b, "\x1b]2;"...)
	b = append(b, s.title...)
	b = append(b, '\a')
	if s.top != 0 || s.bot != s.rows-1 {
		b = csiAppend(b, 'r', s.top+1, s.bot+1)
	}
	b = appendMode(b, "1", s.modes.appCursor)
	b = appendMode(b, "25", !s.modes.cursorHidden)
	b = appendMode(b, "2004", s.modes.bracketedPaste)
	b = appendMode(b, "1004", s.modes.focus)
	b = appendMode(b, "1006", s.modes.mouseSGR)
	b = appendMode(b, "1005", s.modes.mouseUTF8)
	b = appendMode(b, "1015", s.modes.mouseURXVT)
	for _, m := range []int{9, 1000, 1002, 1003} {
		b = appendMode(b, strconv.Itoa(m), s.modes.mouse == m)
	}
	if s.modes.appKeypad {
		b = append(b, "\x1b="...)
	} else {
		b = append(b, "\x1b>"...)
	}
	if s.modes.insert {
		b = append(b, "\x1b[4h"...)
	}
	if s.modes.noWrap {
		b = append(b, "\x1b[?7l"...)
	}
	y := s.y
	if s.modes.origin {
		b = append(b, "\x1b[?6h"...)
		y -= s.top
	}
	b = csiAppend(b, 'H', y+1, min(s.x, s.cols-1)+1)
	b = appendSGR(b, style{}, s.pen)
	if s.charset[0] == '0' {
		b = append(b, "\x1b(0"...)
	}
	return append(b, "\x1b[?2026l"...)
}

// paint draws grid g on a blank screen, then sets its saved cursor.
func (s *Screen) paint(b []byte, g *grid, saved savedCursor) []byte {
	b = append(b, "\x1b[H\x1b[2J"...)
	cur := s.g
	s.g = g
	// The main screen keeps its own size while the alternate one is shown.
	for y := range min(s.rows, len(g.rows)) {
		if s.g.isBlank(y, 0, s.cols, 0) {
			continue
		}
		b = csiAppend(b, 'H', y+1, 1)
		b = s.appendRowANSI(b, y, true)
	}
	s.g = cur
	if saved.set {
		b = csiAppend(b, 'H', saved.y+1, min(saved.x, s.cols-1)+1)
		b = appendSGR(b, style{}, saved.pen)
		b = append(b, "\x1b7\x1b[0m"...)
	}
	return b
}

func appendMode(b []byte, m string, on bool) []byte {
	b = append(b, "\x1b[?"...)
	b = append(b, m...)
	if on {
		return append(b, 'h')
	}
	return append(b, 'l')
}

func csiAppend(b []byte, final byte, params ...int) []byte {
	b = append(b, "\x1b["...)
	for i, p := range params {
		if i > 0 {
			b = append(b, ';')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return append(b, final)
}

// String is Text, for debugging.
func (s *Screen) String() string { return strings.TrimRight(s.Text(), "\n") }
