package vt

// Resizing the main screen as tmux resizes a pane (docs/terminal.md):
// rows leave at the bottom below the cursor, then at the top into the
// history; rows come back from the history when the screen grows; and a
// new width reflows the history and the screen, joining the lines the
// program wrapped and wrapping them again, so nothing is cut off by
// narrowing and widening again. The rules are tmux 3.3a's
// (screen_resize_y, grid_reflow), which the tests hold us to.

// toX appends row's first used cells, resolved, to dst.
func (s *Screen) toX(dst []xcell, row []cell, used int) []xcell {
	for _, c := range row[:min(used, len(row))] {
		x := xcell{st: s.style(c.st), w: c.w}
		switch {
		case c.r > 0:
			x.r = c.r
		case c.r < 0 && int(-c.r-1) < len(s.clusters):
			x.cl = s.clusters[-c.r-1]
		}
		dst = append(dst, x)
	}
	return dst
}

// rowX returns grid g's row y as an xline of its own.
func (s *Screen) rowX(g *grid, y int) xline {
	cells := s.toX(nil, g.rows[y], int(g.used[y]))
	return xline{cells: cells[:len(cells):len(cells)], wrapped: g.wrapped[y]}
}

// putX writes line l into row y of grid g (blank beforehand), interning
// its styles and characters as it goes, so that a compaction on the way
// sees only valid cells.
func (s *Screen) putX(g *grid, y int, l xline) {
	row := g.rows[y]
	n := min(len(l.cells), len(row))
	for x, c := range l.cells[:n] {
		st, ok := s.intern(c.st)
		if !ok {
			s.compact()
			st, _ = s.intern(c.st)
		}
		out := cell{r: c.r, st: st, w: c.w}
		if c.cl != "" {
			if out.r, ok = s.cluster(c.cl); !ok {
				s.compact()
				if out.r, ok = s.cluster(c.cl); !ok {
					out.r = 0xfffd
				}
			}
			// A compaction renumbers styles: look this one up again.
			st, _ = s.intern(c.st)
			out.st = st
		}
		if c.w == 2 && x+1 >= len(row) {
			out = blank(0) // half a wide character does not fit
		}
		row[x] = out
	}
	g.used[y] = uint16(n)
	g.wrapped[y] = l.wrapped && n == len(l.cells)
}

// resizeMain gives the main screen (shown or not) and its history the
// size cols x rows, moving the cursor (x, y) with the content, and returns
// where it ends.
func (s *Screen) resizeMain(cols, rows, x, y int) (int, int) {
	g := s.main
	oldRows, oldCols := len(g.rows), len(g.rows[0])
	if cols == oldCols && rows == oldRows {
		return x, y
	}
	x, y = min(x, oldCols), min(y, oldRows-1)
	hist := s.hist.limit > 0
	// Every line, the history's then the screen's.
	lines := make([]xline, 0, s.hist.Len()+oldRows)
	var arena []xcell // the decoded lines' cells, cut from large arrays
	s.hist.each(0, func(line []byte) {
		if cap(arena)-len(arena) < MaxCols+1 {
			arena = make([]xcell, 0, 32<<10)
		}
		l := decodeX(line, arena[len(arena):])
		if n := len(l.cells); n <= cap(arena)-len(arena) { // decoded in place
			arena = arena[:len(arena)+n]
			l.cells = arena[len(arena)-n : len(arena) : len(arena)]
		}
		lines = append(lines, l)
	})
	for r := range oldRows {
		lines = append(lines, s.rowX(g, r))
	}
	hsize := s.hist.Len()
	scrolled := s.hist.scrolled
	cy := hsize + y

	// The height first, at the old width (screen_resize_y).
	switch {
	case rows < oldRows:
		needed := oldRows - rows
		avail := min(oldRows-1-y, needed) // rows below the cursor go first
		lines = lines[:len(lines)-avail]
		needed -= avail
		if hist {
			hsize += needed
			scrolled += needed
		} else if avail = min(y, needed); avail > 0 {
			lines = append(lines[:hsize], lines[hsize+avail:]...)
			cy -= avail
		}
	case rows > oldRows:
		needed := rows - oldRows
		if hist {
			avail := min(scrolled, needed)
			hsize -= avail
			scrolled -= avail
			needed -= avail
		}
		for range needed {
			lines = append(lines, xline{})
		}
	}

	// Then the width (screen_reflow).
	if cols != oldCols {
		wx, wy := wrapPosition(lines, x, cy)
		lines = reflowLines(lines, cols)
		for len(lines) < rows {
			lines = append(lines, xline{})
		}
		hsize = len(lines) - rows
		x, cy = unwrapPosition(lines, wx, wy)
	}
	if cy >= hsize {
		y = cy - hsize
	} else {
		x, y = 0, 0
	}

	// Back into the history (none is kept without one) and a new grid.
	var enc [][]byte
	var b []byte
	for _, l := range lines[:hsize*b2i(hist)] {
		b = encodeLine(b[:0], l.cells, l.wrapped)
		enc = append(enc, append([]byte(nil), b...))
	}
	s.hist.rebuild(enc)
	s.hist.scrolled = min(scrolled, hsize)
	s.main = newGrid(cols, rows)
	for r := range rows {
		s.putX(s.main, r, lines[hsize+r])
	}
	return x, y
}

// wrapPosition is tmux's grid_wrap_position: the cursor as a place in an
// unwrapped line.
func wrapPosition(lines []xline, px, py int) (int, int) {
	ax, ay := 0, 0
	for yy := 0; yy < py; yy++ {
		if lines[yy].wrapped {
			ax += len(lines[yy].cells)
		} else {
			ax, ay = 0, ay+1
		}
	}
	if px >= len(lines[py].cells) {
		return -1, ay // past the end of the line
	}
	return ax + px, ay
}

// unwrapPosition is tmux's grid_unwrap_position.
func unwrapPosition(lines []xline, wx, wy int) (int, int) {
	yy, ay := 0, 0
	for ; yy < len(lines)-1; yy++ {
		if ay == wy {
			break
		}
		if !lines[yy].wrapped {
			ay++
		}
	}
	if wx < 0 {
		for lines[yy].wrapped && yy < len(lines)-1 {
			yy++
		}
		return len(lines[yy].cells), yy
	}
	for lines[yy].wrapped && yy < len(lines)-1 {
		if wx < len(lines[yy].cells) {
			break
		}
		wx -= len(lines[yy].cells)
		yy++
	}
	return wx, yy
}

// rline is a line being reflowed.
type rline struct {
	xline
	dead bool
}

// reflowLines is tmux's grid_reflow: lines rewrapped at width sx.
func reflowLines(in []xline, sx int) []xline {
	src := make([]rline, len(in))
	for i, l := range in {
		src[i] = rline{xline: xline{cells: l.cells[:len(l.cells):len(l.cells)], wrapped: l.wrapped}}
	}
	var dst []xline
	for yy := range src {
		gl := &src[yy]
		if gl.dead {
			continue
		}
		at, width := 0, 0
		for i, c := range gl.cells {
			if at == 0 && width+int(c.w) > sx {
				at = i
			}
			width += int(c.w)
		}
		switch {
		case width == sx:
			dst = append(dst, move(gl))
		case width > sx:
			dst = reflowSplit(dst, src, sx, yy, at)
		case gl.wrapped:
			dst = reflowJoin(dst, src, sx, yy, width, false)
		default:
			dst = append(dst, move(gl))
		}
	}
	return dst
}

func move(l *rline) xline {
	out := l.xline
	*l = rline{dead: true}
	return out
}

// reflowJoin is grid_reflow_join: the lines after yy joined onto it (or
// onto the last line made, with already) while they fit.
func reflowJoin(dst []xline, src []rline, sx, yy, width int, already bool) []xline {
	if !already {
		dst = append(dst, move(&src[yy]))
	}
	to := len(dst) - 1
	gl := &dst[to]
	var from *rline
	lines, want, wrapped := 0, 0, true
	for {
		line := yy + 1 + lines
		if line >= len(src) {
			break
		}
		if !src[line].wrapped {
			wrapped = false
		}
		if len(src[line].cells) == 0 {
			if !wrapped {
				break
			}
			lines++
			continue
		}
		gc := src[line].cells[0]
		if width+int(gc.w) > sx {
			break
		}
		width += int(gc.w)
		gl.cells = append(gl.cells, gc)
		from = &src[line]
		for want = 1; want < len(from.cells); want++ {
			gc = from.cells[want]
			if width+int(gc.w) > sx {
				break
			}
			width += int(gc.w)
			gl.cells = append(gl.cells, gc)
		}
		lines++
		if !wrapped || want != len(from.cells) || width == sx {
			break
		}
	}
	if lines == 0 {
		return dst
	}
	left := 0
	if from != nil {
		left = len(from.cells) - want
	}
	if left != 0 {
		from.cells = from.cells[want:len(from.cells):len(from.cells)]
		lines--
	} else if !wrapped {
		gl.wrapped = false
	}
	for i := yy + 1; i < yy+1+lines; i++ {
		src[i] = rline{dead: true}
	}
	return dst
}

// reflowSplit is grid_reflow_split: line yy, wider than sx, cut at at
// and the rest wrapped at sx.
func reflowSplit(dst []xline, src []rline, sx, yy, at int) []xline {
	gl := &src[yy]
	wasWrapped := gl.wrapped
	cells := gl.cells
	dst = append(dst, xline{cells: cells[:at:at], wrapped: true})
	// The pieces are cut from one array the size of the rest.
	rest := make([]xcell, 0, len(cells)-at)
	start, width := 0, 0
	for _, gc := range cells[at:] {
		if width+int(gc.w) > sx {
			dst = append(dst, xline{cells: rest[start:len(rest):len(rest)], wrapped: true})
			start, width = len(rest), 0
		}
		width += int(gc.w)
		rest = append(rest, gc)
	}
	dst = append(dst, xline{cells: rest[start:len(rest):len(rest)], wrapped: wasWrapped})
	*gl = rline{dead: true}
	if width < sx && wasWrapped {
		dst = reflowJoin(dst, src, sx, yy, width, true)
	}
	return dst
}
