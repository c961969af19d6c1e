package vt

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// The common case, made cheap: a program that floods its terminal writes
// lines of plain ASCII ended by CR LF, and the daemon feeds the screen
// every byte (docs/terminal.md). feedPlain carries out such runs itself,
// a row's worth of characters at a time with one style lookup, and leaves
// everything else (escapes, UTF-8, other controls, insert mode, line
// drawing, no auto-wrap) to the parser and print, byte for byte. The
// screen must end exactly as the parser's path leaves it:
// FuzzFastPathMatchesParser feeds both the same bytes and compares them.

// feedPlain carries out the plain bytes at the start of p, while the
// parser is in its ground state with no UTF-8 character begun (the
// caller checks), and returns how many it took: 0 when p starts with a
// byte the parser must see.
func (s *Screen) feedPlain(p []byte) int {
	i := 0
	for i < len(p) {
		b := p[i]
		switch {
		case b >= 0x20 && b < 0x7f:
			if s.modes.insert || s.modes.noWrap || s.charset[s.gl] != 'B' {
				return i
			}
			j := i + 1
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x7f {
				j++
			}
			s.printRun(p[i:j])
			i = j
		case b == '\r' || b == '\n' || b == '\b' || b == '\t' || b == '\v' || b == '\f':
			s.execute(b) // what the parser would call for it in its ground state
			i++
		default:
			return i
		}
	}
	return i
}

// printRun writes a run of printable ASCII at the cursor as print and put
// would write it a character at a time, with auto-wrap on, insert mode off
// and the ASCII character set in use (the caller checks).
func (s *Screen) printRun(run []byte) {
	for i := 0; i < len(run); {
		row := s.g.rows[s.y]
		if x := s.x - 1; x >= 0 && (row[x].r < 0 || row[x].w == 0) && s.afterJoiner() {
			s.print(rune(run[i])) // it joins an emoji sequence before it
			i++
			continue
		}
		if s.x >= s.cols {
			s.g.wrapped[s.y] = true
			s.x = 0
			s.lineFeed()
			row = s.g.rows[s.y]
		}
		st := s.penStyle() // after the line feed, as put looks it up: a scroll may compact the tables
		x0 := s.x
		n := min(len(run)-i, s.cols-x0)
		chunk, dst := run[i:i+n], row[x0:x0+n]
		changed := s.changed
		for k, b := range chunk {
			c := cell{r: rune(b), st: st, w: 1}
			if dst[k] != c {
				dst[k] = c
				changed = true
			}
		}
		// The right half of a wide character the last one overwrote half of.
		for x := x0 + n; x < s.cols && row[x].w == 0; x++ {
			row[x] = blank(0)
			changed = true
		}
		s.changed = changed
		s.g.use(s.y, x0+n)
		s.x = x0 + n
		s.last, s.lastW = rune(chunk[n-1]), 1
		i += n
	}
}

// encodeRow appends row's first used cells, encoded as encodeLine encodes
// them after toX, without resolving the cells into xcells first: a flood
// pushes every line into the history.
func (s *Screen) encodeRow(b []byte, row []cell, used int, wrapped bool) []byte {
	cells := row[:min(used, len(row))]
	b = binary.AppendUvarint(b, uint64(len(cells)))
	flags := byte(0)
	if wrapped {
		flags = 1
	}
	b = append(b, flags)
	end := len(cells)
	for end > 0 && s.plainBlank(cells[end-1]) {
		end--
	}
	lenAt := len(b)
	b = append(b, 0, 0) // the text's length: a 2-byte uvarint, filled in below
	start := len(b)
	items, mixed := 0, false // the characters, and whether their styles differ
	if end > 0 {
		b = slices.Grow(b, end)
	}
	for x := 0; x < end; x++ {
		c := cells[x]
		if c.r > 0 && c.r < utf8.RuneSelf && c.w == 1 { // plain ASCII, most lines
			b = append(b, byte(c.r))
			items++
			mixed = mixed || c.st != cells[0].st
			continue
		}
		if c.w == 0 && x > 0 && cells[x-1].w == 2 {
			continue
		}
		items++
		mixed = mixed || c.st != cells[0].st
		switch r, cl := s.resolve(c); {
		case cl != "":
			b = append(b, cl...)
		case r == 0:
			b = append(b, ' ')
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	tl := len(b) - start
	if tl >= 1<<14 {
		b, tl, end = b[:start], 0, 0
	}
	b[lenAt], b[lenAt+1] = byte(tl)|0x80, byte(tl>>7)
	if !mixed { // one style: one run, none for the default style
		if end > 0 && s.style(cells[0].st) != (style{}) {
			return appendRun(append(b, 1), items, s.style(cells[0].st))
		}
		return append(b, 0)
	}
	runsAt := len(b)
	b = append(b, 0)
	nruns, n := 0, 0
	var cur style
	curIdx := -1 // cur's index in the tables, while it came from one
	for x := 0; x < end; x++ {
		c := cells[x]
		if c.w == 0 && x > 0 && cells[x-1].w == 2 {
			continue
		}
		if int(c.st) != curIdx {
			st := s.style(c.st)
			if n > 0 && st != cur {
				b = appendRun(b, n, cur)
				nruns++
				n = 0
			}
			cur, curIdx = st, int(c.st)
		}
		n++
	}
	if n > 0 && (cur != style{} || nruns > 0) {
		b = appendRun(b, n, cur)
		nruns++
	}
	if nruns > 255 {
		b, nruns = b[:runsAt+1], 0
	}
	b[runsAt] = byte(nruns)
	return b
}

// appendRun appends a style run of n characters in style st.
func appendRun(b []byte, n int, st style) []byte {
	b = binary.AppendUvarint(b, uint64(n))
	b = binary.AppendUvarint(b, uint64(st.Fg))
	b = binary.AppendUvarint(b, uint64(st.Bg))
	b = binary.AppendUvarint(b, uint64(st.Ul))
	return binary.AppendUvarint(b, uint64(st.Attrs))
}

// resolve returns what cell c holds as toX resolves it: a character, or
// a multi-rune one.
func (s *Screen) resolve(c cell) (rune, string) {
	switch {
	case c.r > 0:
		return c.r, ""
	case c.r < 0 && int(-c.r-1) < len(s.clusters):
		return 0, s.clusters[-c.r-1]
	}
	return 0, ""
}

// plainBlank says whether c resolves to an xcell that is blank().
func (s *Screen) plainBlank(c cell) bool {
	r, cl := s.resolve(c)
	return r == 0 && cl == "" && c.w == 1 && s.style(c.st) == (style{})
}
