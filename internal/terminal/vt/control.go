package vt

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"
)

// execute carries out a C0 control character.
func (s *Screen) execute(b byte) {
	switch b {
	case '\b':
		s.backspace()
	case '\t':
		s.tab(1)
	case '\n', '\v', '\f':
		s.lineFeed()
		if s.modes.newline {
			s.x = 0
		}
	case '\r':
		s.x = 0
	case 0x0e: // SO
		s.gl = 1
	case 0x0f: // SI
		s.gl = 0
	}
}

// backspace moves left; at the start of a row that the one above wrapped
// onto, it goes back to that row's end (as tmux does).
func (s *Screen) backspace() {
	switch {
	case s.x > 0:
		s.x = min(s.x, s.cols) - 1
	case s.y > 0 && s.g.wrapped[s.y-1]:
		s.y--
		s.x = s.cols - 1
	}
}

// tab moves to the n-th next tab stop, or the last column.
func (s *Screen) tab(n int) {
	for ; n > 0 && s.x < s.cols-1; n-- {
		s.x++
		for s.x < s.cols-1 && !s.tabs[s.x] {
			s.x++
		}
	}
}

// backTab moves to the n-th tab stop before the cursor, or column 0.
func (s *Screen) backTab(n int) {
	s.x = min(s.x, s.cols-1)
	for ; n > 0 && s.x > 0; n-- {
		s.x--
		for s.x > 0 && !s.tabs[s.x] {
			s.x--
		}
	}
}

// esc carries out an escape sequence.
func (s *Screen) esc(cmd ansi.Cmd) {
	switch cmd.Intermediate() {
	case '(', ')':
		g := 0
		if cmd.Intermediate() == ')' {
			g = 1
		}
		if f := cmd.Final(); f == '0' {
			s.charset[g] = '0'
		} else {
			s.charset[g] = 'B'
		}
		return
	case '#':
		if cmd.Final() == '8' {
			s.alignmentTest()
		}
		return
	case 0:
	default:
		return
	}
	switch cmd.Final() {
	case '7':
		s.saveCursor()
	case '8':
		s.restoreCursor()
	case 'D':
		s.lineFeed()
	case 'E':
		s.lineFeed()
		s.x = 0
	case 'H':
		s.tabs[min(s.x, s.cols-1)] = true
	case 'M':
		s.reverseIndex()
	case 'c':
		if s.historyOn() {
			s.clearIntoHistory() // RIS clears the screen, into history as ED 2 does
		}
		size := s.Size()
		s.reset(size)
		s.changed = true
	case '=':
		s.modes.appKeypad = true
	case '>':
		s.modes.appKeypad = false
	}
}

// alignmentTest fills the screen with E (DECALN).
func (s *Screen) alignmentTest() {
	s.top, s.bot = 0, s.rows-1
	for y := range s.rows {
		for x := range s.cols {
			s.g.rows[y][x] = cell{r: 'E', w: 1}
		}
		s.g.wrapped[y], s.g.used[y] = false, uint16(s.cols)
	}
	s.x, s.y = 0, 0
	s.changed = true
}

// osc carries out an operating system command: the title. The colour
// queries (OSC 10, 11 and the rest) go unanswered, as under tmux 3.3a: a
// program that asks picks the same theme under tend as under tmux
// (docs/terminal.md).
func (s *Screen) osc(cmd int, data []byte) {
	switch cmd {
	case 0, 2:
	default:
		return
	}
	_, title, _ := strings.Cut(string(data), ";")
	title = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(title, ""))
	if len(title) > maxTitle {
		title = strings.ToValidUTF8(title[:maxTitle], "")
	}
	if title != s.title {
		s.title = title
		s.changed = true
	}
}

// csi carries out a control sequence.
func (s *Screen) csi(cmd ansi.Cmd, params ansi.Params) {
	p := func(i, def int) int {
		v, _, _ := params.Param(i, def)
		if v == 0 && def > 0 {
			v = def // a 0 count means 1
		}
		return v
	}
	n := func() int { return min(p(0, 1), 1<<20) }
	prefix, inter := cmd.Prefix(), cmd.Intermediate()
	if prefix == '?' || prefix == '>' || prefix == '=' || prefix == '<' || inter != 0 {
		s.csiPrivate(cmd, params)
		return
	}
	switch cmd.Final() {
	case '@':
		s.insertCells(n())
	case 'A':
		s.cursorUp(n())
	case 'B', 'e':
		s.cursorDown(n())
	case 'C', 'a':
		s.x = min(s.x+n(), s.cols-1)
	case 'D':
		s.x = max(min(s.x, s.cols)-n(), 0)
	case 'E':
		s.cursorDown(n())
		s.x = 0
	case 'F':
		s.cursorUp(n())
		s.x = 0
	case 'G', '`':
		s.x = min(n(), s.cols) - 1
	case 'H', 'f':
		s.moveTo(p(1, 1)-1, p(0, 1)-1)
	case 'I':
		s.tab(n())
	case 'J':
		s.eraseDisplay(p(0, 0))
	case 'K':
		s.eraseLine(p(0, 0))
	case 'L':
		s.insertLines(n())
	case 'M':
		s.deleteLines(n())
	case 'P':
		s.deleteCells(n())
	case 'S':
		s.scrollUp(min(n(), s.rows), true)
	case 'T':
		if len(params) <= 1 { // with more, it is a mouse tracking request
			s.scrollDown(min(n(), s.rows))
		}
	case 'X':
		x := min(s.x, s.cols-1)
		s.erase(s.y, x, x+n())
	case 'Z':
		s.backTab(n())
	case 'b':
		if s.last != 0 {
			for range min(n(), maxRepeat, s.cols*s.rows) {
				s.put(s.last, s.lastW)
			}
		}
	case 'c':
		if p(0, 0) == 0 {
			s.reply("\x1b[?1;2c") // a VT100 with advanced video, as tmux answers
		}
	case 't':
		// The size in characters, columns first as tmux 3.3a gives it
		// (xterm gives rows first); tmux answers no other window query.
		if p(0, 0) == 18 {
			s.reply("\x1b[8;" + strconv.Itoa(s.cols) + ";" + strconv.Itoa(s.rows) + "t")
		}
	case 'd':
		s.moveTo(s.x, n()-1)
	case 'g':
		switch p(0, 0) {
		case 0:
			s.tabs[min(s.x, s.cols-1)] = false
		case 3:
			clear(s.tabs)
		}
	case 'h', 'l':
		for i := range params {
			s.setANSIMode(params[i].Param(0), cmd.Final() == 'h')
		}
	case 'm':
		s.sgr(params)
	case 'n':
		switch p(0, 0) {
		case 5:
			s.reply("\x1b[0n")
		case 6:
			x, y := min(s.x, s.cols-1), s.y
			if s.modes.origin {
				y -= s.top
			}
			s.reply("\x1b[" + strconv.Itoa(y+1) + ";" + strconv.Itoa(x+1) + "R")
		}
	case 'r':
		s.setRegion(p(0, 1)-1, p(1, s.rows)-1)
	case 's':
		s.saveCursor()
	case 'u':
		s.restoreCursor()
	}
}

// csiPrivate carries out the sequences with a private prefix or an
// intermediate byte.
func (s *Screen) csiPrivate(cmd ansi.Cmd, params ansi.Params) {
	switch {
	case cmd.Prefix() == '?' && (cmd.Final() == 'h' || cmd.Final() == 'l') && cmd.Intermediate() == 0:
		for i := range params {
			s.setDECMode(params[i].Param(0), cmd.Final() == 'h')
		}
	case cmd.Prefix() == '>' && cmd.Final() == 'c' && cmd.Intermediate() == 0:
		s.reply("\x1b[>84;0;0c") // DA2: tmux's ('T'), so programs draw as they do under tmux
	case cmd.Prefix() == '>' && cmd.Final() == 'q' && cmd.Intermediate() == 0:
		s.reply("\x1bP>|tmux 3.3a\x1b\\") // XTVERSION, tmux's answer for the same reason
	case cmd.Intermediate() == '!' && cmd.Final() == 'p':
		s.softReset()
	}
}

// cursorUp and cursorDown stop at the scroll region's edge when they start
// inside it.
func (s *Screen) cursorUp(n int) {
	lim := 0
	if s.y >= s.top {
		lim = s.top
	}
	s.y = max(s.y-n, lim)
	s.x = min(s.x, s.cols-1)
}

func (s *Screen) cursorDown(n int) {
	lim := s.rows - 1
	if s.y <= s.bot {
		lim = s.bot
	}
	s.y = min(s.y+n, lim)
	s.x = min(s.x, s.cols-1)
}

// moveTo places the cursor, relative to the scroll region in origin mode.
func (s *Screen) moveTo(x, y int) {
	if s.modes.origin {
		y = min(y+s.top, s.bot)
	}
	s.setCursor(x, y)
}

func (s *Screen) eraseDisplay(mode int) {
	x := min(s.x, s.cols)
	switch mode {
	case 0:
		if x == 0 && s.y == 0 && s.historyOn() {
			s.clearIntoHistory()
			return
		}
		s.erase(s.y, x, s.cols)
		for y := s.y + 1; y < s.rows; y++ {
			s.erase(y, 0, s.cols)
		}
	case 1:
		for y := 0; y < s.y; y++ {
			s.erase(y, 0, s.cols)
		}
		s.erase(s.y, 0, min(x+1, s.cols))
	case 2:
		if s.historyOn() {
			s.clearIntoHistory()
			return
		}
		for y := range s.rows {
			s.erase(y, 0, s.cols)
		}
	case 3: // the history
		if s.hist.Len() > 0 {
			s.hist.clear()
			s.changed = true
		}
	}
}

func (s *Screen) eraseLine(mode int) {
	x := min(s.x, s.cols)
	switch mode {
	case 0:
		s.erase(s.y, x, s.cols)
	case 1:
		s.erase(s.y, 0, min(x+1, s.cols))
	case 2:
		s.erase(s.y, 0, s.cols)
	}
}

// insertLines and deleteLines work from the cursor's row to the bottom of
// the scroll region, when the cursor is in it.
func (s *Screen) insertLines(n int) {
	if s.y < s.top || s.y > s.bot {
		return
	}
	top := s.top
	s.top = s.y
	s.scrollDown(min(n, s.rows))
	s.top = top
	s.x = 0
}

func (s *Screen) deleteLines(n int) {
	if s.y < s.top || s.y > s.bot {
		return
	}
	top := s.top
	s.top = s.y
	s.scrollUp(min(n, s.rows), false)
	s.top = top
	s.x = 0
}

// setRegion sets the scroll region (DECSTBM) and homes the cursor.
func (s *Screen) setRegion(top, bot int) {
	bot = min(bot, s.rows-1)
	if top < 0 || top >= bot {
		return
	}
	s.top, s.bot = top, bot
	s.moveTo(0, 0)
}

func (s *Screen) setANSIMode(m int, on bool) {
	switch m {
	case 4:
		s.modes.insert = on
	case 20:
		s.modes.newline = on
	}
}

func (s *Screen) setDECMode(m int, on bool) {
	switch m {
	case 1:
		s.modes.appCursor = on
	case 6:
		s.modes.origin = on
		s.moveTo(0, 0)
	case 7:
		s.modes.noWrap = !on
	case 25:
		s.modes.cursorHidden = !on
	case 9, 1000, 1002, 1003:
		if on {
			s.modes.mouse = m
		} else if s.modes.mouse == m {
			s.modes.mouse = 0
		}
	case 1004:
		s.modes.focus = on
	case 1005:
		s.modes.mouseUTF8 = on
	case 1006:
		s.modes.mouseSGR = on
	case 1015:
		s.modes.mouseURXVT = on
	case 2004:
		s.modes.bracketedPaste = on
	case 2026:
		s.modes.syncedOutput = on
	case 47, 1047:
		s.useAlt(on)
	case 1048:
		if on {
			s.saveCursor()
		} else {
			s.restoreCursor()
		}
	case 1049:
		if on {
			s.saveCursor()
			s.useAlt(true)
		} else {
			s.leaveAlt(true)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// softReset is DECSTR: modes, pen and tab stops back to their defaults;
// like tmux, it also clears the screen and homes the cursor.
func (s *Screen) softReset() {
	s.tabs = defaultTabs(s.cols)
	for y := range s.rows {
		s.erase(y, 0, s.cols)
	}
	s.x, s.y = 0, 0
	s.modes.insert, s.modes.origin, s.modes.noWrap = false, false, false
	s.modes.cursorHidden, s.modes.appCursor, s.modes.appKeypad = false, false, false
	s.top, s.bot = 0, s.rows-1
	s.setPen(style{})
	s.charset, s.gl = [2]byte{'B', 'B'}, 0
	s.saved[s.screenIndex()] = savedCursor{}
}
