package vt

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"io"
	"sync"
	"unicode/utf8"
)

// History: the lines that scrolled off the top of the main screen, kept
// as tmux keeps them (docs/terminal.md): up to a limit, and once the limit
// is reached the oldest tenth goes at once, so `capture-pane -S -N` and
// `tend screen --history N` return the same lines.
//
// A line is kept as its text and its style runs, not as cells, and lines
// are packed into flate blocks (packLines, packBytes): a thousand tty runs each keep
// a full history, and text compresses several times over.

// A packed block holds at least packLines lines and packBytes bytes of
// them encoded: short lines (a flood of numbers) go in larger blocks, as
// flate's cost per block is much the same whatever it holds.
const (
	packLines = 128
	packBytes = 4 << 10
)

// history is a screen's history. Not safe for concurrent use: the Screen
// that holds it is guarded by its Terminal's lock.
type history struct {
	limit    int      // lines kept (tty_history); 0 keeps none
	n        int      // lines held
	blocks   []hblock // packed lines, oldest first
	skip     int      // lines at the start of blocks[0] already dropped
	tail     []byte   // the newest lines, encoded, not yet packed
	tailN    int      // lines in tail
	scrolled int      // lines that scrolled in and may come back when the screen grows (tmux's hscrolled)
}

// hblock is packed lines (at least packLines), compressed.
type hblock struct {
	z []byte
	n int
}

// Len is the number of lines held.
func (h *history) Len() int { return h.n }

// collect makes room for one more line as tmux does: at the limit, the
// oldest tenth of the limit is dropped.
func (h *history) collect() {
	if h.n == 0 || h.n < h.limit {
		return
	}
	k := min(max(h.limit/10, 1), h.n)
	h.dropOldest(k)
	h.scrolled = min(h.scrolled, h.n)
}

// add appends an encoded line (see encodeLine).
func (h *history) add(line []byte) {
	h.tail = binary.AppendUvarint(h.tail, uint64(len(line)))
	h.tail = append(h.tail, line...)
	h.tailN++
	h.n++
	if h.tailN >= packLines && len(h.tail) >= packBytes {
		h.blocks = append(h.blocks, hblock{z: deflate(h.tail), n: h.tailN})
		h.tail, h.tailN = h.tail[:0], 0
		if cap(h.tail) > 64<<10 {
			h.tail = nil
		}
	}
}

// dropOldest forgets the k oldest lines.
func (h *history) dropOldest(k int) {
	k = min(k, h.n)
	h.n -= k
	for k > 0 && len(h.blocks) > 0 {
		left := h.blocks[0].n - h.skip
		if k < left {
			h.skip += k
			return
		}
		k -= left
		h.blocks[0] = hblock{}
		h.blocks = h.blocks[1:]
		h.skip = 0
	}
	if k > 0 {
		off := 0
		for ; k > 0; k-- {
			l, m := binary.Uvarint(h.tail[off:])
			off += m + int(l)
		}
		h.tail = append(h.tail[:0:0], h.tail[off:]...)
		h.tailN = countLines(h.tail)
	}
	if len(h.blocks) == 0 {
		h.blocks = nil
	}
}

func countLines(b []byte) int {
	n := 0
	for off := 0; off < len(b); n++ {
		l, m := binary.Uvarint(b[off:])
		off += m + int(l)
	}
	return n
}

// clear forgets every line (ED 3).
func (h *history) clear() {
	*h = history{limit: h.limit}
}

// each calls fn with every encoded line from index from (0 is the
// oldest) on, oldest first; line is valid only during the call.
func (h *history) each(from int, fn func(line []byte)) {
	i := 0
	for bi, blk := range h.blocks {
		skip := 0
		if bi == 0 {
			skip = h.skip
		}
		if i+blk.n-skip <= from {
			i += blk.n - skip
			continue
		}
		data := inflate(blk.z)
		for off, j := 0, 0; off < len(data); j++ {
			l, m := binary.Uvarint(data[off:])
			line := data[off+m : off+m+int(l)]
			off += m + int(l)
			if j < skip {
				continue
			}
			if i >= from {
				fn(line)
			}
			i++
		}
	}
	for off := 0; off < len(h.tail); {
		l, m := binary.Uvarint(h.tail[off:])
		line := h.tail[off+m : off+m+int(l)]
		off += m + int(l)
		if i >= from {
			fn(line)
		}
		i++
	}
}

// rebuild replaces the lines with these, encoded, oldest first.
func (h *history) rebuild(lines [][]byte) {
	limit, scrolled := h.limit, h.scrolled
	*h = history{limit: limit}
	for _, l := range lines {
		h.add(l)
	}
	h.scrolled = min(scrolled, h.n)
}

// size is the bytes the history holds (for the bench and tests).
func (h *history) size() int {
	n := cap(h.tail) + cap(h.blocks)*32
	for _, b := range h.blocks {
		n += cap(b.z)
	}
	return n
}

var (
	writers = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.BestSpeed)
		return w
	}}
	readers = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

// deflate compresses p into a new, exactly sized slice.
func deflate(p []byte) []byte {
	var buf bytes.Buffer
	w := writers.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write(p)
	_ = w.Close()
	writers.Put(w)
	return bytes.Clone(buf.Bytes())
}

// inflate undoes deflate; a block tend wrote itself cannot be corrupt,
// and if it were, the lines lost are only history.
func inflate(z []byte) []byte {
	r := readers.Get().(io.ReadCloser)
	_ = r.(flate.Resetter).Reset(bytes.NewReader(z), nil)
	out, _ := io.ReadAll(r)
	readers.Put(r)
	return out
}

// A line, encoded: its used cells (tmux's cellused, which reflow works
// from), whether it wrapped, its text (a character per cell, blank cells
// as spaces, the right halves of wide characters left out, trailing
// unstyled blanks trimmed), then its style runs, each a count of
// characters and a style.

// xcell is a cell with its style and character resolved, apart from any
// screen's tables: what history and reflow work with.
type xcell struct {
	r  rune   // 0 = blank
	cl string // a multi-rune character, when not ""
	st style
	w  uint8 // 1, 2 for a wide character, 0 for its right half
}

// xline is a line of xcells (its used cells) and its wrapped flag.
type xline struct {
	cells   []xcell
	wrapped bool
}

func (c xcell) blank() bool { return c.r == 0 && c.cl == "" && c.st == (style{}) && c.w == 1 }

// encodeLine appends the line to b.
func encodeLine(b []byte, cells []xcell, wrapped bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(cells)))
	flags := byte(0)
	if wrapped {
		flags = 1
	}
	b = append(b, flags)
	end := len(cells) // up to the last cell that is not a plain blank
	for end > 0 && cells[end-1].blank() {
		end--
	}
	lenAt := len(b)
	b = append(b, 0, 0) // the text's length: a 2-byte uvarint, filled in below
	start := len(b)
	items := 0
	for x := 0; x < end; x++ {
		c := cells[x]
		switch {
		case c.w == 0 && x > 0 && cells[x-1].w == 2:
			continue
		case c.cl != "":
			b = append(b, c.cl...)
		case c.r == 0:
			b = append(b, ' ')
		default:
			b = utf8.AppendRune(b, c.r)
		}
		items++
	}
	tl := len(b) - start
	if tl >= 1<<14 { // a line of long clusters: keep its place, not its text
		b, tl, end = b[:start], 0, 0
	}
	b[lenAt], b[lenAt+1] = byte(tl)|0x80, byte(tl>>7)
	runsAt := len(b)
	b = append(b, 0)
	nruns, n := 0, 0
	var cur style
	flush := func() {
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(cur.Fg))
		b = binary.AppendUvarint(b, uint64(cur.Bg))
		b = binary.AppendUvarint(b, uint64(cur.Ul))
		b = binary.AppendUvarint(b, uint64(cur.Attrs))
		nruns++
	}
	for x := 0; x < end; x++ {
		c := cells[x]
		if c.w == 0 && x > 0 && cells[x-1].w == 2 {
			continue
		}
		if n > 0 && c.st != cur {
			flush()
			n = 0
		}
		cur = c.st
		n++
	}
	if n > 0 && (cur != style{} || nruns > 0) {
		flush()
	}
	if nruns > 255 { // more runs than a byte counts: keep the text
		b, nruns = b[:runsAt+1], 0
	}
	b[runsAt] = byte(nruns)
	return b
}

// decodeX turns an encoded line back into cells.
func decodeX(line []byte, dst []xcell) xline {
	d := decodeLine(line)
	ri, left := 0, 0
	if len(d.runs) > 0 {
		left = d.runs[0].n
	}
	items(d.text, func(ch []byte, w int) {
		st := style{}
		for left == 0 && ri+1 < len(d.runs) {
			ri++
			left = d.runs[ri].n
		}
		if left > 0 {
			st = d.runs[ri].st
			left--
		}
		c := xcell{st: st, w: uint8(w)}
		if r, n := utf8.DecodeRune(ch); n == len(ch) {
			if r != ' ' {
				c.r = r
			}
		} else {
			c.cl = string(ch)
		}
		if w == 0 {
			c.w = 1
		}
		dst = append(dst, c)
		if w == 2 {
			dst = append(dst, xcell{st: st})
		}
	})
	for len(dst) < d.used {
		dst = append(dst, xcell{w: 1})
	}
	return xline{cells: dst, wrapped: d.wrapped}
}

// hrun is a style run of a decoded line.
type hrun struct {
	n  int
	st style
}

// decodedLine is an encoded line's parts.
type decodedLine struct {
	used    int
	wrapped bool
	text    []byte
	runs    []hrun
}

func decodeLine(b []byte) decodedLine {
	var d decodedLine
	u, m := binary.Uvarint(b)
	d.used, b = int(u), b[m:]
	if len(b) == 0 {
		return d
	}
	d.wrapped, b = b[0]&1 != 0, b[1:]
	tl, m := binary.Uvarint(b)
	if m <= 0 || int(tl) > len(b)-m {
		return d
	}
	d.text, b = b[m:m+int(tl)], b[m+int(tl):]
	if len(b) == 0 {
		return d
	}
	nruns := int(b[0])
	b = b[1:]
	for range nruns {
		var v [5]uint64
		for i := range v {
			var k int
			v[i], k = binary.Uvarint(b)
			if k <= 0 {
				return d
			}
			b = b[k:]
		}
		d.runs = append(d.runs, hrun{n: int(v[0]), st: style{Fg: color(v[1]), Bg: color(v[2]), Ul: color(v[3]), Attrs: attr(v[4])}})
	}
	return d
}

// items cuts a line's text into its characters, as the screen put them in
// cells: a zero-width character, or one after a zero width joiner, joins
// the one before.
func items(text []byte, fn func(ch []byte, w int)) {
	start, w := -1, 0
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRune(text[i:])
		rw := runeWidth(r)
		joins := start >= 0 && (rw == 0 || bytes.HasSuffix(text[start:i], []byte("\u200d")))
		if !joins {
			if start >= 0 {
				fn(text[start:i], w)
			}
			start, w = i, rw
		}
		i += n
	}
	if start >= 0 {
		fn(text[start:], w)
	}
}

// appendText appends the line as text, trailing spaces trimmed.
func (d decodedLine) appendText(b []byte) []byte {
	return append(b, bytes.TrimRight(d.text, " ")...)
}

// appendANSI appends the line with its styles, as appendRowANSI does a
// row's.
func (d decodedLine) appendANSI(b []byte) []byte {
	var pen style
	ri, left := 0, 0
	if len(d.runs) > 0 {
		left = d.runs[0].n
	}
	// The characters up to the last one shown or styled.
	var chars [][]byte
	var sts []style
	items(d.text, func(ch []byte, _ int) {
		st := style{}
		for left == 0 && ri+1 < len(d.runs) {
			ri++
			left = d.runs[ri].n
		}
		if left > 0 {
			st = d.runs[ri].st
			left--
		}
		chars = append(chars, ch)
		sts = append(sts, st)
	})
	end := len(chars)
	for end > 0 && string(chars[end-1]) == " " && sts[end-1].Bg == 0 && sts[end-1].Attrs&(attrReverse|attrUnderlineMask|attrStrike|attrOverline) == 0 {
		end--
	}
	for i := range end {
		b = appendSGR(b, pen, sts[i])
		pen = sts[i]
		b = append(b, chars[i]...)
	}
	return appendSGR(b, pen, style{})
}
