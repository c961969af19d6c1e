package vt

import (
	"strconv"

	"github.com/charmbracelet/x/ansi"
)

// sgr applies Select Graphic Rendition parameters to the pen.
func (s *Screen) sgr(params ansi.Params) {
	pen := s.pen
	if len(params) == 0 {
		pen = style{}
	}
	for i := 0; i < len(params); i++ {
		v := params[i].Param(0)
		switch {
		case v == 0:
			pen = style{}
		case v == 1:
			pen.Attrs |= attrBold
		case v == 2:
			pen.Attrs |= attrDim
		case v == 3:
			pen.Attrs |= attrItalic
		case v == 4:
			u := 1
			if params[i].HasMore() && i+1 < len(params) { // 4:n picks the style
				i++
				u = params[i].Param(1)
			}
			pen.Attrs = pen.Attrs.withUnderline(u)
		case v == 5 || v == 6:
			pen.Attrs |= attrBlink
		case v == 7:
			pen.Attrs |= attrReverse
		case v == 8:
			pen.Attrs |= attrHidden
		case v == 9:
			pen.Attrs |= attrStrike
		case v == 21:
			pen.Attrs = pen.Attrs.withUnderline(2)
		case v == 22:
			pen.Attrs &^= attrBold | attrDim
		case v == 23:
			pen.Attrs &^= attrItalic
		case v == 24:
			pen.Attrs = pen.Attrs.withUnderline(0)
		case v == 25:
			pen.Attrs &^= attrBlink
		case v == 27:
			pen.Attrs &^= attrReverse
		case v == 28:
			pen.Attrs &^= attrHidden
		case v == 29:
			pen.Attrs &^= attrStrike
		case v >= 30 && v <= 37:
			pen.Fg = indexed(uint8(v - 30))
		case v == 38:
			pen.Fg, i = extColor(params, i, pen.Fg)
		case v == 39:
			pen.Fg = 0
		case v >= 40 && v <= 47:
			pen.Bg = indexed(uint8(v - 40))
		case v == 48:
			pen.Bg, i = extColor(params, i, pen.Bg)
		case v == 49:
			pen.Bg = 0
		case v == 53:
			pen.Attrs |= attrOverline
		case v == 55:
			pen.Attrs &^= attrOverline
		case v == 58:
			pen.Ul, i = extColor(params, i, pen.Ul)
		case v == 59:
			pen.Ul = 0
		case v >= 90 && v <= 97:
			pen.Fg = indexed(uint8(v - 90 + 8))
		case v >= 100 && v <= 107:
			pen.Bg = indexed(uint8(v - 100 + 8))
		}
	}
	s.setPen(pen)
}

// extColor reads the colour after a 38, 48 or 58 at params[i], in either
// form (38;5;n and 38;2;r;g;b, or with colons, 38:2::r:g:b), and returns it
// with the index of the last parameter it used. A malformed one leaves
// the colour as it was.
func extColor(params ansi.Params, i int, old color) (color, int) {
	if i+1 >= len(params) {
		return old, i
	}
	colon := params[i].HasMore()
	kind := params[i+1].Param(0)
	switch kind {
	case 5:
		if i+2 >= len(params) {
			return old, len(params)
		}
		n := params[i+2].Param(0)
		if n < 0 || n > 255 {
			return old, i + 2
		}
		return indexed(uint8(n)), i + 2
	case 2:
		j := i + 2
		// 38:2:cs:r:g:b carries a colour space id before r; count the
		// sub-parameters to know.
		if colon {
			k := i + 1
			for k < len(params) && params[k].HasMore() {
				k++
			}
			if k-(i+1) >= 4 {
				j = i + 3
			}
		}
		if j+2 >= len(params) {
			return old, len(params)
		}
		c := func(k int) uint8 { return uint8(max(0, min(params[k].Param(0), 255))) }
		return rgb(c(j), c(j+1), c(j+2)), j + 2
	}
	return old, i + 1
}

// appendSGR appends the sequence that switches a terminal from style from
// to style to (nothing when they are the same). It starts from a reset
// when an attribute has to be turned off, which keeps it short and sure.
func appendSGR(b []byte, from, to style) []byte {
	if from == to {
		return b
	}
	b = append(b, "\x1b["...)
	start := len(b)
	if from.Attrs&^to.Attrs != 0 || from.Fg != 0 && to.Fg == 0 || from.Bg != 0 && to.Bg == 0 || from.Ul != 0 && to.Ul == 0 {
		b = append(b, '0')
		from = style{}
	}
	add := func(s string) {
		if len(b) > start {
			b = append(b, ';')
		}
		b = append(b, s...)
	}
	attrs := []struct {
		a   attr
		sgr string
	}{{attrBold, "1"}, {attrDim, "2"}, {attrItalic, "3"}, {attrBlink, "5"}, {attrReverse, "7"},
		{attrHidden, "8"}, {attrStrike, "9"}, {attrOverline, "53"}}
	for _, at := range attrs {
		if to.Attrs&at.a != 0 && from.Attrs&at.a == 0 {
			add(at.sgr)
		}
	}
	if u := to.Attrs.Underline(); u != from.Attrs.Underline() {
		if u == 1 {
			add("4")
		} else {
			add("4:" + strconv.Itoa(u))
		}
	}
	if to.Fg != from.Fg {
		add(colorSGR(to.Fg, 30, 90, "38"))
	}
	if to.Bg != from.Bg {
		add(colorSGR(to.Bg, 40, 100, "48"))
	}
	if to.Ul != from.Ul {
		add(colorSGR(to.Ul, 0, 0, "58"))
	}
	return append(b, 'm')
}

// colorSGR is the SGR parameter text of a non-default colour.
func colorSGR(c color, base, bright int, ext string) string {
	v := uint32(c & 0xffffff)
	switch c &^ 0xffffff {
	case colorIndexed:
		switch {
		case base > 0 && v < 8:
			return strconv.Itoa(base + int(v))
		case base > 0 && v < 16:
			return strconv.Itoa(bright + int(v) - 8)
		}
		return ext + ";5;" + strconv.Itoa(int(v))
	case colorRGB:
		return ext + ";2;" + strconv.Itoa(int(v>>16)) + ";" + strconv.Itoa(int(v>>8&0xff)) + ";" + strconv.Itoa(int(v&0xff))
	}
	return ext[:1] + "9" // 39, 49, 59
}
