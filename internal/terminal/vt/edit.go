package vt

import (
	"github.com/mattn/go-runewidth"
)

// What the characters and controls a program writes do to the screen.

// runeWidth is the columns r takes: 0 for combining marks and other
// zero-width characters, 2 for wide (East Asian, emoji), else 1.
func runeWidth(r rune) int {
	if r < 0x7f {
		return 1
	}
	return runewidth.RuneWidth(r)
}

// print writes one character at the cursor. A C1 control that comes as
// UTF-8 (U+0080-U+009F) is dropped, as tmux drops it: it is not acted on,
// and kept as a character it would reach whoever prints the screen
// (tend screen, docs/trust.md).
func (s *Screen) print(r rune) {
	if r < 0x20 || r >= 0x7f && r <= 0x9f {
		return
	}
	if s.charset[s.gl] == '0' && r >= 0x5f && r <= 0x7e {
		r = decGraphics[r-0x5f]
	}
	w := runeWidth(r)
	if w == 0 || s.afterJoiner() {
		s.combine(r)
		return
	}
	if w > s.cols {
		return
	}
	s.last, s.lastW = r, w
	s.put(r, w)
}

// afterJoiner says whether the character before the cursor ends with a
// zero width joiner: the next one joins it (an emoji sequence).
func (s *Screen) afterJoiner() bool {
	x := s.x - 1
	if x < 0 {
		return false
	}
	row := s.g.rows[s.y]
	if row[x].w == 0 && x > 0 {
		x--
	}
	c := row[x]
	if c.r >= 0 || int(-c.r-1) >= len(s.clusters) {
		return false
	}
	cl := s.clusters[-c.r-1]
	return len(cl) >= 3 && cl[len(cl)-3:] == "\u200d"
}

// put writes character r of width w at the cursor and moves past it. Like
// tmux, it blanks the rest of a wide character it overwrites part of:
// the right half after it, and (except for plain ASCII, which tmux writes
// on a faster path) the left half before it.
func (s *Screen) put(r rune, w int) {
	if s.x+w > s.cols {
		if s.modes.noWrap {
			if w > 1 {
				return // a wide character that does not fit is dropped
			}
			s.x = s.cols - 1
		} else {
			s.g.wrapped[s.y] = true
			s.x = 0
			s.lineFeed()
		}
	}
	row := s.g.rows[s.y]
	if s.modes.insert {
		s.insertCells(w)
	}
	ascii := r < 0x7f && !s.modes.noWrap && !s.modes.insert
	if !ascii && row[s.x].w == 0 {
		x := s.x
		for x > 0 && row[x].w == 0 {
			row[x] = blank(0)
			x--
		}
		row[x] = blank(0)
		s.changed = true
	}
	for x := s.x + w; x < s.cols && row[x].w == 0; x++ {
		row[x] = blank(0)
		s.changed = true
	}
	st := s.penStyle()
	c := cell{r: r, st: st, w: uint8(w)}
	if row[s.x] != c || w == 2 && row[s.x+1] != (cell{st: st}) {
		row[s.x] = c
		if w == 2 {
			row[s.x+1] = cell{st: st}
		}
		s.changed = true
	}
	s.g.use(s.y, s.x+w)
	s.x += w
	if s.modes.noWrap && s.x >= s.cols {
		s.x = s.cols - 1
	}
}

// combine adds a zero-width character to the one before the cursor.
func (s *Screen) combine(r rune) {
	x := s.x - 1
	if x < 0 {
		return
	}
	row := s.g.rows[s.y]
	if row[x].w == 0 && x > 0 {
		x--
	}
	c := row[x]
	if c.r == 0 {
		return
	}
	base := s.text(nil, c)
	if len(base) >= 32 { // enough marks on one character
		return
	}
	nr, ok := s.cluster(string(appendRune(base, r)))
	if !ok {
		s.compact()
		c = row[x]
		if nr, ok = s.cluster(string(appendRune(s.text(nil, c), r))); !ok {
			return
		}
	}
	row[x].r = nr
	s.changed = true
}

// lineFeed moves the cursor down, scrolling the region at its bottom.
func (s *Screen) lineFeed() {
	switch {
	case s.y == s.bot:
		s.scrollUp(1, true)
	case s.y < s.rows-1:
		s.y++
	}
}

// reverseIndex moves the cursor up, scrolling the region at its top.
func (s *Screen) reverseIndex() {
	switch {
	case s.y == s.top:
		s.scrollDown(1)
	case s.y > 0:
		s.y--
	}
}

// scrollUp scrolls the region up n rows. With toHistory (a line feed or
// SU, not a deleted line) the rows that leave the main screen's region go
// into the history, as in tmux, whatever the region.
func (s *Screen) scrollUp(n int, toHistory bool) {
	if !s.changed {
		s.changed = !s.regionStill()
	}
	if toHistory && s.historyOn() {
		n = min(n, s.bot-s.top+1)
		for i := range n {
			s.hist.collect()
			s.pushHistory(s.top + i)
			s.hist.scrolled++
		}
	}
	s.g.scrollUp(s.top, s.bot, n, s.eraseStyle())
}

// pushHistory adds the main screen's row y to the history.
func (s *Screen) pushHistory(y int) {
	if s.slowOnly {
		s.xbuf = s.toX(s.xbuf[:0], s.main.rows[y], int(s.main.used[y]))
		s.hbuf = encodeLine(s.hbuf[:0], s.xbuf, s.main.wrapped[y])
	} else {
		s.hbuf = s.encodeRow(s.hbuf[:0], s.main.rows[y], int(s.main.used[y]), s.main.wrapped[y])
	}
	s.hist.add(s.hbuf)
}

func (s *Screen) scrollDown(n int) {
	if !s.changed {
		s.changed = !s.regionStill()
	}
	s.g.scrollDown(s.top, s.bot, n, s.eraseStyle())
}

// regionStill says whether scrolling the region would leave it as it is
// (it is blank): then the content did not change. Nothing has changed in
// this Feed yet when it is asked, so one answer serves the rest of the
// Feed for the same region (a flood of newlines on a blank screen scans
// it once).
func (s *Screen) regionStill() bool {
	memo := stillMemo{g: s.g, top: s.top, bot: s.bot, st: s.eraseStyle(), feed: s.feeds}
	if s.still == memo {
		return true
	}
	for y := s.top; y <= s.bot; y++ {
		if !s.g.isBlank(y, 0, s.cols, memo.st) {
			return false
		}
	}
	s.still = memo
	return true
}

// stillMemo is the region regionStill last found blank, in which Feed.
type stillMemo struct {
	g        *grid
	top, bot int
	st       uint16
	feed     uint64
}

// insertCells opens n blank cells at the cursor, pushing the rest of the
// row right (ICH, and insert mode).
func (s *Screen) insertCells(n int) {
	x := min(s.x, s.cols-1)
	row := s.g.rows[s.y]
	n = min(n, s.cols-x)
	copy(row[x+n:], row[x:])
	st := s.eraseStyle()
	for i := x; i < x+n; i++ {
		row[i] = blank(st)
	}
	s.g.use(s.y, s.cols) // as tmux moves the cells: the row is used to its end
	s.changed = true
}

// deleteCells removes n cells at the cursor, pulling the rest of the row
// left (DCH).
func (s *Screen) deleteCells(n int) {
	x := min(s.x, s.cols-1)
	row := s.g.rows[s.y]
	n = min(n, s.cols-x)
	copy(row[x:], row[x+n:])
	st := s.eraseStyle()
	for i := s.cols - n; i < s.cols; i++ {
		row[i] = blank(st)
	}
	s.g.use(s.y, s.cols-n)
	s.changed = true
}

// erase blanks columns [x0, x1) of row y with the erase style.
func (s *Screen) erase(y, x0, x1 int) {
	st := s.eraseStyle()
	if !s.changed && !s.g.isBlank(y, x0, x1, st) {
		s.changed = true
	}
	s.g.clearRow(y, x0, x1, st)
}

// clearIntoHistory clears the main screen as tmux does with
// scroll-on-clear (its default): the rows down to the last one used go
// into the history first.
func (s *Screen) clearIntoHistory() {
	last := 0
	for y := range s.rows {
		if s.main.used[y] != 0 {
			last = y + 1
		}
	}
	for y := range last {
		s.hist.collect()
		s.pushHistory(y)
	}
	for y := range s.rows {
		s.erase(y, 0, s.cols)
	}
	s.hist.scrolled = 0
}

// historyOn says whether what leaves the screen now goes into history.
func (s *Screen) historyOn() bool { return s.g == s.main && s.hist.limit > 0 }

// setCursor moves the cursor to (x, y), kept on the screen.
func (s *Screen) setCursor(x, y int) {
	s.x = max(0, min(x, s.cols-1))
	s.y = max(0, min(y, s.rows-1))
}

// useAlt shows the alternate screen (blank) or the main one again.
func (s *Screen) useAlt(on bool) {
	if on == (s.alt != nil) {
		return
	}
	if on {
		s.alt = newGrid(s.cols, s.rows)
		s.g = s.alt
	} else {
		s.leaveAlt(false)
	}
	s.changed = true
}

// leaveAlt shows the main screen again, with the saved cursor when
// restore (1049). The main screen kept its size while hidden: it takes
// the screen's size now, reflowed with the cursor, as tmux does.
func (s *Screen) leaveAlt(restore bool) {
	if s.alt == nil {
		if restore {
			s.restoreCursor()
		}
		return
	}
	s.alt, s.g = nil, s.main
	if restore {
		s.restoreCursor()
	}
	s.x, s.y = s.resizeMain(s.cols, s.rows, s.x, s.y)
	s.g = s.main
	s.changed = true
}

func (s *Screen) saveCursor() {
	s.saved[s.screenIndex()] = savedCursor{set: true, x: s.x, y: s.y, pen: s.pen,
		origin: s.modes.origin, charset: s.charset, gl: s.gl}
}

func (s *Screen) restoreCursor() {
	c := s.saved[s.screenIndex()]
	if !c.set {
		c = savedCursor{charset: [2]byte{'B', 'B'}}
	}
	s.x, s.y = min(c.x, s.cols), min(c.y, s.rows-1)
	s.setPen(c.pen)
	s.modes.origin, s.charset, s.gl = c.origin, c.charset, c.gl
}

func (s *Screen) screenIndex() int {
	if s.alt != nil {
		return 1
	}
	return 0
}

// reply queues an answer for the program; a program that never reads its
// input cannot make the queue grow past a few KiB.
func (s *Screen) reply(b string) {
	if len(s.replies)+len(b) <= 4096 {
		s.replies = append(s.replies, b...)
	}
}
