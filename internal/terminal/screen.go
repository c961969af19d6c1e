package terminal

import (
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/mattn/go-runewidth"
)

// Screen is a terminal emulator's state: what a terminal of its size
// would show after the bytes fed to it, kept current byte by byte. The
// bytes are parsed by github.com/charmbracelet/x/ansi (a VT500 state
// machine with UTF-8); Screen carries out what they mean. Any input is
// safe: invalid UTF-8, sequences cut at any point between two Feeds,
// floods; the work per byte and the memory are bounded.
//
// A Screen is not safe for concurrent use: a Terminal guards its screen
// with its lock.
type Screen struct {
	p          *ansi.Parser
	cols, rows int
	main, alt  *grid // alt is nil outside the alternate screen
	g          *grid // the one shown
	tables

	x, y     int // the cursor; x == cols after the last column is written (the next character wraps)
	pen      Style
	penIdx   int32 // pen's index in styles, -1 until a character needs it
	saved    [2]savedCursor
	top, bot int // the scroll region, rows top..bot

	modes   modes
	charset [2]byte // G0, G1: 'B' ASCII or '0' DEC line drawing
	gl      int     // the charset in use, 0 or 1 (SI/SO)
	tabs    []bool
	title   string
	last    rune // the last character printed, for REP
	lastW   int

	u8     [utf8.UTFMax]byte // a UTF-8 character begun and not yet complete
	u8n    int               // its bytes so far
	u8need int               // its length

	feeds     uint64    // Feeds so far
	still     stillMemo // see regionStill
	changed   bool      // the content changed during this Feed
	changedAt time.Time
	replies   []byte // answers to the program's queries, not yet taken
	now       func() time.Time
}

// savedCursor is what DECSC keeps.
type savedCursor struct {
	set     bool
	x, y    int
	pen     Style
	origin  bool
	charset [2]byte
	gl      int
}

// modes are the terminal modes a program sets.
type modes struct {
	insert, newline          bool // IRM, LNM
	appCursor, appKeypad     bool // DECCKM, DECKPAM
	origin, noWrap           bool // DECOM, not DECAWM
	cursorHidden             bool // not DECTCEM
	bracketedPaste, focus    bool // 2004, 1004
	mouse                    int  // 0, 9, 1000, 1002, 1003
	mouseSGR, mouseUTF8      bool // 1006, 1005
	mouseURXVT, syncedOutput bool // 1015, 2026
}

// Limits on what one sequence may ask for.
const (
	maxTitle  = 1024 // bytes of a window title kept
	maxRepeat = 1 << 16
)

// NewScreen returns a blank screen of the given size.
func NewScreen(size Size) *Screen {
	s := &Screen{now: time.Now}
	s.p = ansi.NewParser()
	s.p.SetDataSize(maxTitle + 16) // OSC and DCS payloads: a title; longer ones are cut
	s.p.SetHandler(ansi.Handler{
		Print:     s.print,
		Execute:   s.execute,
		HandleCsi: s.csi,
		HandleEsc: s.esc,
		HandleOsc: s.osc,
	})
	s.reset(size)
	s.changedAt = s.now()
	return s
}

// reset puts the screen in its power-on state (RIS).
func (s *Screen) reset(size Size) {
	s.cols, s.rows = size.Cols, size.Rows
	s.main = newGrid(s.cols, s.rows)
	s.alt, s.g = nil, s.main
	s.tables = tables{limit: tableLimit(size)}
	s.x, s.y = 0, 0
	s.pen, s.penIdx = Style{}, 0
	s.saved = [2]savedCursor{}
	s.top, s.bot = 0, s.rows-1
	s.modes = modes{}
	s.charset, s.gl = [2]byte{'B', 'B'}, 0
	s.tabs = defaultTabs(s.cols)
	s.title = ""
	s.last, s.lastW = 0, 0
}

func defaultTabs(cols int) []bool {
	t := make([]bool, cols)
	for x := 8; x < cols; x += 8 {
		t[x] = true
	}
	return t
}

// SetClock replaces time.Now for ChangedAt (tests).
func (s *Screen) SetClock(now func() time.Time) { s.now = now; s.changedAt = now() }

// Feed runs the program's output bytes through the screen.
func (s *Screen) Feed(p []byte) {
	s.feeds++
	for _, b := range p {
		if b < 0x80 && s.u8need == 0 {
			s.p.Advance(b)
			continue
		}
		s.feedHigh(b)
	}
	if s.changed {
		s.changed = false
		s.changedAt = s.now()
	}
}

// feedHigh takes a byte of a UTF-8 character (or one that breaks it off):
// the parser sees only whole, valid characters. Bytes that are not UTF-8
// are dropped, and the byte that cut a character short starts afresh, as
// tmux does (the parser alone would take 0x80-0x9F for C1 controls).
func (s *Screen) feedHigh(b byte) {
	if s.u8need > 0 {
		if b&0xc0 == 0x80 {
			s.u8[s.u8n] = b
			if s.u8n++; s.u8n < s.u8need {
				return
			}
			ch := s.u8[:s.u8n]
			s.u8need, s.u8n = 0, 0
			if utf8.Valid(ch) {
				for _, c := range ch {
					s.p.Advance(c)
				}
			}
			return
		}
		s.u8need, s.u8n = 0, 0
		if b < 0x80 {
			s.p.Advance(b)
			return
		}
	}
	switch {
	case b >= 0xc2 && b <= 0xdf:
		s.u8need = 2
	case b >= 0xe0 && b <= 0xef:
		s.u8need = 3
	case b >= 0xf0 && b <= 0xf4:
		s.u8need = 4
	default:
		return // a stray continuation byte, or never valid
	}
	s.u8[0], s.u8n = b, 1
}

// ChangedAt is when the screen's content last changed: a character, an
// erasure, a scroll, the alternate screen, the title or the size. The
// cursor moving, blinking or hiding is no change, nor is a repaint of
// what was already there.
func (s *Screen) ChangedAt() time.Time { return s.changedAt }

// Size is the screen's size.
func (s *Screen) Size() Size { return Size{Cols: s.cols, Rows: s.rows} }

// Cursor is the cursor's column and row, from 0. After a character is
// written in the last column the column is Cols, as tmux reports it: the
// next character goes on the next row.
func (s *Screen) Cursor() (x, y int) { return s.x, s.y }

// CursorVisible says whether the program shows the cursor.
func (s *Screen) CursorVisible() bool { return !s.modes.cursorHidden }

// Title is the window title the program set (OSC 0 or 2).
func (s *Screen) Title() string { return s.title }

// AltScreen says whether the alternate screen is shown (full-screen
// programs such as vim and less use it).
func (s *Screen) AltScreen() bool { return s.alt != nil }

// BracketedPaste says whether the program asked for pasted text to come
// between ESC[200~ and ESC[201~.
func (s *Screen) BracketedPaste() bool { return s.modes.bracketedPaste }

// AppCursor says whether the program asked for application cursor keys
// (arrows as ESC O A rather than ESC [ A).
func (s *Screen) AppCursor() bool { return s.modes.appCursor }

// TakeReplies returns the answers the screen owes the program (to cursor
// position and device attribute queries), appended to b, and forgets them.
// A terminal writes them to the program's input, as a real one would.
func (s *Screen) TakeReplies(b []byte) []byte {
	b = append(b, s.replies...)
	s.replies = s.replies[:0]
	return b
}

// Resize changes the size. The content keeps its place from the top
// left; when the cursor's row would fall off the bottom, rows leave at the
// top instead.
func (s *Screen) Resize(size Size) {
	if size.Cols == s.cols && size.Rows == s.rows {
		return
	}
	drop := max(0, s.y-size.Rows+1)
	s.main = s.main.resized(size.Cols, size.Rows, drop)
	if s.alt != nil {
		s.alt = s.alt.resized(size.Cols, size.Rows, drop)
		s.g = s.alt
	} else {
		s.g = s.main
	}
	s.limit = tableLimit(size)
	tabs := defaultTabs(size.Cols)
	copy(tabs, s.tabs)
	s.tabs = tabs
	s.cols, s.rows = size.Cols, size.Rows
	s.x, s.y = min(s.x, s.cols-1), s.y-drop
	s.top, s.bot = 0, s.rows-1
	for i := range s.saved {
		s.saved[i].x, s.saved[i].y = min(s.saved[i].x, s.cols-1), min(s.saved[i].y, s.rows-1)
	}
	s.changed = true
	s.changedAt = s.now()
}

// penStyle returns the index of the pen's style, interning it.
func (s *Screen) penStyle() uint16 {
	if s.penIdx >= 0 {
		return uint16(s.penIdx)
	}
	i, ok := s.intern(s.pen)
	if !ok {
		s.compact()
		i, _ = s.intern(s.pen)
	}
	s.penIdx = int32(i)
	return i
}

// eraseStyle is the style erased cells get: the pen's background only.
func (s *Screen) eraseStyle() uint16 {
	st := Style{Bg: s.pen.Bg}
	i, ok := s.intern(st)
	if !ok {
		s.compact()
		i, _ = s.intern(st)
	}
	return i
}

// setPen changes the pen; its index is found when next needed.
func (s *Screen) setPen(p Style) {
	if p != s.pen {
		s.pen, s.penIdx = p, -1
	}
}

// compact rebuilds the style and cluster tables from what the cells use.
func (s *Screen) compact() {
	old := s.tables
	s.tables = tables{limit: tableLimit(s.Size())}
	for _, g := range []*grid{s.main, s.alt} {
		if g == nil {
			continue
		}
		for _, row := range g.rows {
			for x, c := range row {
				st, _ := s.intern(old.style(c.st))
				c.st = st
				if c.r < 0 {
					var ok bool
					if c.r, ok = s.cluster(string(old.text(nil, c))); !ok {
						c.r = utf8.RuneError
					}
				}
				row[x] = c
			}
		}
	}
	s.penIdx = -1
}

// tableLimit is the bound of a screen's tables: twice the cells of both
// screens, at least minTable.
func tableLimit(size Size) int { return max(minTable, 4*size.Cols*size.Rows) }

// runeWidth is the columns r takes: 0 for combining marks and other
// zero-width characters, 2 for wide (East Asian, emoji), else 1.
func runeWidth(r rune) int {
	if r < 0x7f {
		return 1
	}
	return runewidth.RuneWidth(r)
}

// print writes one character at the cursor.
func (s *Screen) print(r rune) {
	if r < 0x20 || r == 0x7f {
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
		s.scrollUp(1)
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

func (s *Screen) scrollUp(n int) {
	if !s.changed {
		s.changed = !s.regionStill()
	}
	s.g.scrollUp(s.top, s.bot, n, s.eraseStyle())
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
	s.changed = true
}

// erase blanks columns [x0, x1) of row y with the erase style.
func (s *Screen) erase(y, x0, x1 int) {
	st := s.eraseStyle()
	if !s.changed && s.g.isBlank(y, x0, x1, st) {
		return
	}
	s.g.clearRow(y, x0, x1, st)
	s.changed = true
}

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
		s.alt, s.g = nil, s.main
	}
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

// appendRune appends r's UTF-8 encoding.
func appendRune(b []byte, r rune) []byte { return utf8.AppendRune(b, r) }

// decGraphics maps 0x5f..0x7e in the DEC special graphics set (ESC ( 0)
// to the line-drawing characters a terminal shows for them.
var decGraphics = [32]rune{
	' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼',
	'⎺', '⎻', '─', '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
}
