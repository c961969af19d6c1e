package vt

// The screen's storage, kept small on purpose: a thousand idle terminals
// hold a thousand screens. A cell is 8 bytes (a character, a style number,
// a width); styles and multi-rune characters live in per-screen tables the
// cells point into, as tmux's grid keeps its extended cells apart.

// cell is one column of one row.
type cell struct {
	r  rune   // the character; 0 = blank; < 0 = cluster -(r+1) of the screen's table
	st uint16 // index into the screen's styles; 0 = the default style
	w  uint8  // columns taken: 1, 2 for a wide character, 0 for its right half
}

// blank is an erased cell in style st (erasures keep the background colour).
func blank(st uint16) cell { return cell{st: st, w: 1} }

// grid is one screen buffer (the main one or the alternate one): rows of
// cells cut from one array, so scrolling moves row headers, not cells.
type grid struct {
	rows    [][]cell
	wrapped []bool   // the row's last column wrapped onto the next row
	used    []uint16 // columns the row has used, as tmux's cellused: what reflow works from

	// rows, wrapped and used are windows at off on these, twice as long:
	// a line feed that scrolls the whole screen slides them by one (the
	// top row goes round to the bottom) and moves all the row headers
	// only once every rows lines (slide).
	rowBuf  [][]cell
	wrapBuf []bool
	usedBuf []uint16
	off     int
}

func newGrid(cols, rows int) *grid {
	g := &grid{rowBuf: make([][]cell, 2*rows), wrapBuf: make([]bool, 2*rows), usedBuf: make([]uint16, 2*rows)}
	g.window()
	cells := make([]cell, cols*rows)
	for i := range cells {
		cells[i] = blank(0)
	}
	for y := range g.rows {
		g.rows[y] = cells[y*cols : (y+1)*cols : (y+1)*cols]
	}
	return g
}

// resized returns a copy of g at the new size: the top-left part that fits,
// shifted up by drop rows (so the cursor's row stays on screen).
func (g *grid) resized(cols, rows, drop int) *grid {
	n := newGrid(cols, rows)
	for y := range rows {
		src := y + drop
		if src < 0 || src >= len(g.rows) {
			continue
		}
		copy(n.rows[y], g.rows[src])
		if cols < len(g.rows[src]) && n.rows[y][cols-1].w == 2 {
			n.rows[y][cols-1] = blank(n.rows[y][cols-1].st) // half a wide character does not fit
		}
		n.wrapped[y] = g.wrapped[src] && cols >= len(g.rows[src])
		n.used[y] = min(g.used[src], uint16(cols))
	}
	return n
}

// scrollUp moves rows top+n..bot up by n within [top, bot] and fills the
// rows freed at the bottom with blanks in style st.
func (g *grid) scrollUp(top, bot, n int, st uint16) {
	if n > bot-top+1 {
		n = bot - top + 1
	}
	if n <= 0 {
		return
	}
	g.rotate(top, bot, n)
	for y := bot - n + 1; y <= bot; y++ {
		g.clearRow(y, 0, len(g.rows[y]), st)
	}
}

// scrollDown moves rows top..bot-n down by n within [top, bot] and fills
// the rows freed at the top with blanks.
func (g *grid) scrollDown(top, bot, n int, st uint16) {
	if n > bot-top+1 {
		n = bot - top + 1
	}
	if n <= 0 {
		return
	}
	g.rotate(top, bot, bot-top+1-n)
	for y := top; y < top+n; y++ {
		g.clearRow(y, 0, len(g.rows[y]), st)
	}
}

// window cuts rows, wrapped and used at off.
func (g *grid) window() {
	n := len(g.rowBuf) / 2
	g.rows = g.rowBuf[g.off : g.off+n : g.off+n]
	g.wrapped = g.wrapBuf[g.off : g.off+n : g.off+n]
	g.used = g.usedBuf[g.off : g.off+n : g.off+n]
}

// slide turns all the rows up by one, as rotate(0, rows-1, 1).
func (g *grid) slide() {
	n := len(g.rows)
	if g.off+n == len(g.rowBuf) { // at the end: back to the start
		copy(g.rowBuf, g.rows)
		copy(g.wrapBuf, g.wrapped)
		copy(g.usedBuf, g.used)
		g.off = 0
	}
	g.rowBuf[g.off+n], g.wrapBuf[g.off+n], g.usedBuf[g.off+n] = g.rowBuf[g.off], g.wrapBuf[g.off], g.usedBuf[g.off]
	g.rowBuf[g.off] = nil
	g.off++
	g.window()
}

// rotate turns rows top..bot (and their flags) up by n.
func (g *grid) rotate(top, bot, n int) {
	if n == 1 && top == 0 && bot == len(g.rows)-1 {
		g.slide()
		return
	}
	if n == 1 { // a line feed at the bottom: one row round, the rest moved as a block
		r, w, u := g.rows[top], g.wrapped[top], g.used[top]
		copy(g.rows[top:bot], g.rows[top+1:bot+1])
		copy(g.wrapped[top:bot], g.wrapped[top+1:bot+1])
		copy(g.used[top:bot], g.used[top+1:bot+1])
		g.rows[bot], g.wrapped[bot], g.used[bot] = r, w, u
		return
	}
	g.reverse(top, top+n-1)
	g.reverse(top+n, bot)
	g.reverse(top, bot)
}

func (g *grid) reverse(i, j int) {
	for ; i < j; i, j = i+1, j-1 {
		g.rows[i], g.rows[j] = g.rows[j], g.rows[i]
		g.wrapped[i], g.wrapped[j] = g.wrapped[j], g.wrapped[i]
		g.used[i], g.used[j] = g.used[j], g.used[i]
	}
}

// use records that row y has used its columns up to x.
func (g *grid) use(y, x int) {
	if u := uint16(min(x, len(g.rows[y]))); u > g.used[y] {
		g.used[y] = u
	}
}

// clearRow blanks columns [x0, x1) of row y. Half a wide character left
// at either edge stays as it is, as in tmux's grid. Only a whole row
// cleared is an empty line again (not used, not wrapped), as in tmux.
func (g *grid) clearRow(y, x0, x1 int, st uint16) {
	row := g.rows[y]
	x0, x1 = max(x0, 0), min(x1, len(row))
	if x0 >= x1 {
		return
	}
	fill(row[x0:x1], blank(st))
	if x0 == 0 && x1 == len(row) {
		g.wrapped[y], g.used[y] = false, 0
	}
}

// isBlank says whether columns [x0, x1) of row y hold nothing to see and
// no style: clearing them again changes nothing.
func (g *grid) isBlank(y, x0, x1 int, st uint16) bool {
	row := g.rows[y]
	for x := max(x0, 0); x < min(x1, len(row)); x++ {
		if row[x] != blank(st) {
			return false
		}
	}
	return true
}

// style is how a cell is drawn: colours and attributes.
type style struct {
	Fg, Bg, Ul color // foreground, background, underline colour
	Attrs      attr
}

// color is a terminal colour: zero is the default, else its kind in the
// top byte (palette or RGB) and its value below.
type color uint32

const (
	colorIndexed color = 1 << 24 // low byte: a palette entry 0..255
	colorRGB     color = 2 << 24 // low 24 bits: 0xRRGGBB
)

// indexed returns palette colour i (0..255).
func indexed(i uint8) color { return colorIndexed | color(i) }

// rgb returns a direct colour.
func rgb(r, g, b uint8) color { return colorRGB | color(r)<<16 | color(g)<<8 | color(b) }

// attr is a set of text attributes.
type attr uint16

// The attributes SGR sets. Underline styles take the three bits of
// AttrUnderlineMask: 1 single, 2 double, 3 curly, 4 dotted, 5 dashed.
const (
	attrBold attr = 1 << iota
	attrDim
	attrItalic
	attrBlink
	attrReverse
	attrHidden
	attrStrike
	attrOverline
	attrUnderline0
	attrUnderline1
	attrUnderline2
	attrUnderlineMask = attrUnderline0 | attrUnderline1 | attrUnderline2
	underlineShift    = 8
)

// Underline returns the underline style: 0 none, 1 single, 2 double,
// 3 curly, 4 dotted, 5 dashed.
func (a attr) Underline() int { return int(a&attrUnderlineMask) >> underlineShift }

func (a attr) withUnderline(u int) attr {
	return a&^attrUnderlineMask | attr(min(u, 5)<<underlineShift)&attrUnderlineMask
}

// Bounds of the per-screen tables: past its bound a table is rebuilt from
// the cells that still use it, so a program that cycles through colours or
// combining marks cannot make a screen grow without bound. A bound is at
// least twice the cells (so rebuilding is rare) and at most what a cell's
// index can name.
const (
	minTable  = 1024
	maxStyles = 1<<16 - 1
)

// tables are a screen's styles and clusters.
type tables struct {
	limit     int     // the bound of each table
	styles    []style // [0] is the default style
	styleIdx  map[style]uint16
	clusters  []string
	clusterIx map[string]int32
}

func (t *tables) style(i uint16) style {
	if int(i) < len(t.styles) {
		return t.styles[i]
	}
	return style{}
}

// intern returns the index of s, adding it if new; ok is false when the
// table is full (the caller compacts and tries again).
func (t *tables) intern(s style) (uint16, bool) {
	if s == (style{}) {
		return 0, true
	}
	if i, ok := t.styleIdx[s]; ok {
		return i, true
	}
	if len(t.styles) >= min(t.limit, maxStyles) {
		return 0, false
	}
	if t.styleIdx == nil {
		t.styleIdx = map[style]uint16{}
		if len(t.styles) == 0 {
			t.styles = append(t.styles, style{})
		}
	}
	i := uint16(len(t.styles))
	t.styles = append(t.styles, s)
	t.styleIdx[s] = i
	return i, true
}

// cluster returns the cell rune for the multi-rune character s, or false
// when the table is full.
func (t *tables) cluster(s string) (rune, bool) {
	if i, ok := t.clusterIx[s]; ok {
		return -(i + 1), true
	}
	if len(t.clusters) >= t.limit {
		return 0, false
	}
	if t.clusterIx == nil {
		t.clusterIx = map[string]int32{}
	}
	i := int32(len(t.clusters))
	t.clusters = append(t.clusters, s)
	t.clusterIx[s] = i
	return -(i + 1), true
}

// text returns what cell c shows, appended to b ("" for blank).
func (t *tables) text(b []byte, c cell) []byte {
	switch {
	case c.r > 0:
		return appendRune(b, c.r)
	case c.r < 0 && int(-c.r-1) < len(t.clusters):
		return append(b, t.clusters[-c.r-1]...)
	}
	return b
}

// blanks is a row of blank cells in the default style, for fill to copy.
var blanks = func() (b [MaxCols]cell) {
	for i := range b {
		b[i] = blank(0)
	}
	return b
}()

// fill sets every cell of cells to c: a copy of blanks, in one move, for
// the common blank; else doubling what is copied each time.
func fill(cells []cell, c cell) {
	if c == blank(0) && len(cells) <= len(blanks) {
		copy(cells, blanks[:len(cells)])
		return
	}
	if len(cells) == 0 {
		return
	}
	cells[0] = c
	for n := 1; n < len(cells); n *= 2 {
		copy(cells[n:], cells[:n])
	}
}
