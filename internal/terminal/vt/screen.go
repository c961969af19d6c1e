package vt

import (
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
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
	pen      style
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

	hist history // the lines that scrolled off the main screen
	hbuf []byte  // a line being encoded for hist
	xbuf []xcell // a row being resolved for hist

	slowOnly bool // every byte through the parser, and no fast path: what the fast path's tests compare with
}

// savedCursor is what DECSC keeps.
type savedCursor struct {
	set     bool
	x, y    int
	pen     style
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
	s.pen, s.penIdx = style{}, 0
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

// Replay feeds p, what the program wrote before this screen existed (the
// tail of its log, for a terminal taken up again after a daemon restart
// or of a run that ended meanwhile), as if at time at: the screen's
// ChangedAt after it, unless at is zero. It drops the answers to the
// queries in p, which were answered long ago, where Feed keeps them for
// TakeReplies.
func (s *Screen) Replay(p []byte, at time.Time) {
	now := s.now
	if !at.IsZero() {
		s.now = func() time.Time { return at }
	}
	s.Feed(p)
	s.now = now
	s.replies = s.replies[:0]
}

// Feed runs the program's output bytes through the screen.
func (s *Screen) Feed(p []byte) {
	s.feeds++
	for i := 0; i < len(p); {
		if s.u8need == 0 && !s.slowOnly && s.p.State() == parser.GroundState {
			if i += s.feedPlain(p[i:]); i == len(p) { // plain text, most of what programs write
				break
			}
		}
		b := p[i]
		i++
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

// SetHistory sets how many lines that scroll off the top of the main
// screen are kept (tty_history; 0 keeps none, and forgets those kept).
func (s *Screen) SetHistory(lines int) {
	s.hist.limit = max(lines, 0)
	if s.hist.limit == 0 {
		s.hist.clear()
	}
}

// Resize changes the size as tmux resizes a pane (see reflow.go): the
// main screen and its history reflow to the new width; the alternate
// screen keeps its content's place from the top left, and when the
// cursor's row would fall off the bottom, rows leave at the top instead.
func (s *Screen) Resize(size Size) {
	if size.Cols == s.cols && size.Rows == s.rows {
		return
	}
	s.limit = tableLimit(size)
	if s.alt != nil {
		drop := max(0, s.y-size.Rows+1)
		s.alt = s.alt.resized(size.Cols, size.Rows, drop)
		s.g = s.alt
		s.x, s.y = min(s.x, size.Cols-1), s.y-drop
	} else {
		s.x, s.y = s.resizeMain(size.Cols, size.Rows, s.x, s.y)
		s.g = s.main
		s.x, s.y = min(s.x, size.Cols), min(s.y, size.Rows-1)
	}
	if size.Cols != s.cols {
		s.tabs = defaultTabs(size.Cols) // tab stops every eight columns again, as tmux resets them
	}
	s.cols, s.rows = size.Cols, size.Rows
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
	st := style{Bg: s.pen.Bg}
	i, ok := s.intern(st)
	if !ok {
		s.compact()
		i, _ = s.intern(st)
	}
	return i
}

// setPen changes the pen; its index is found when next needed.
func (s *Screen) setPen(p style) {
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

// appendRune appends r's UTF-8 encoding.
func appendRune(b []byte, r rune) []byte { return utf8.AppendRune(b, r) }

// decGraphics maps 0x5f..0x7e in the DEC special graphics set (ESC ( 0)
// to the line-drawing characters a terminal shows for them.
var decGraphics = [32]rune{
	' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼',
	'⎺', '⎻', '─', '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
}
