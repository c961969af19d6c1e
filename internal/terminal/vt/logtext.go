package vt

import (
	"github.com/charmbracelet/x/ansi"
)

// TextLines turns a terminal's raw byte stream into plain text lines, for
// the log of a run with a terminal (`tend logs`; `--raw` keeps the bytes).
// Control sequences (CSI, OSC, DCS and the rest) are dropped, even when cut
// between two writes. Within a line, a carriage return goes back to its
// start and what follows overwrites what was there, as on a terminal, so a
// progress bar redrawn in place leaves its last state; erasing to the end
// of the line (ESC[K) cuts it there, backspace and the cursor's moves
// along the line (CUF ESC[nC, CUB ESC[nD, CHA ESC[nG, HPA ESC[n`, HPR,
// tabs to every eighth column, CHT, CBT) step over it or past its end,
// columns counted as on the screen (a wide character takes two), so the
// line reads as the screen showed it: a program that places words with
// cursor moves instead of spaces logs them apart. A newline ends the line.
//
// The zero value is not ready: use NewTextLines.
type TextLines struct {
	p    *ansi.Parser
	line []rune // the line being built, a rune per column (wideRest after a wide one)
	col  int    // where the next character goes in line
	max  int
	emit func(line []byte)
	buf  []byte
}

// NewTextLines returns a filter whose lines are cut at max characters (0:
// 16384) so a stream without newlines cannot grow one without bound.
func NewTextLines(max int) *TextLines {
	if max <= 0 {
		max = 16 << 10
	}
	l := &TextLines{p: ansi.NewParser(), max: max}
	l.p.SetDataSize(64) // payloads are dropped anyway
	l.p.SetHandler(ansi.Handler{
		Print:     l.print,
		Execute:   l.execute,
		HandleCsi: l.csi,
	})
	return l
}

// Write filters p and calls emit with each line it completes, without its
// newline; the line is valid only during the call.
func (l *TextLines) Write(p []byte, emit func(line []byte)) {
	l.emit = emit
	for _, b := range p {
		l.p.Advance(b)
	}
	l.emit = nil
}

// Flush emits the unfinished line, if any: the stream ended.
func (l *TextLines) Flush(emit func(line []byte)) {
	if len(l.line) > 0 {
		l.emit = emit
		l.endLine()
		l.emit = nil
	}
	l.p.Reset()
}

// wideRest stands in the line for the second column of a wide character.
const wideRest rune = -1

func (l *TextLines) print(r rune) {
	if r >= 0x80 && r <= 0x9f {
		return // a C1 control as UTF-8: dropped, as the screen drops it
	}
	if l.col >= l.max {
		l.endLine()
	}
	l.put(r)
	if r >= 0x7f && runeWidth(r) == 2 {
		l.put(wideRest)
	}
}

func (l *TextLines) put(r rune) {
	for len(l.line) < l.col { // the cursor was moved past the end
		l.line = append(l.line, ' ')
	}
	if l.col < len(l.line) {
		l.line[l.col] = r
	} else {
		l.line = append(l.line, r)
	}
	l.col++
}

// tab moves to the n-th next tab stop (every eighth column).
func (l *TextLines) tab(n int) {
	for ; n > 0; n-- {
		l.col = min((l.col/8+1)*8, l.max-1)
	}
}

func (l *TextLines) execute(b byte) {
	switch b {
	case '\n', '\v', '\f':
		l.endLine()
	case '\r':
		l.col = 0
	case '\b':
		if l.col > 0 {
			l.col--
		}
	case '\t':
		l.tab(1)
	}
}

func (l *TextLines) csi(cmd ansi.Cmd, params ansi.Params) {
	if cmd.Prefix() != 0 || cmd.Intermediate() != 0 {
		return
	}
	switch cmd.Final() {
	case 'K':
		if v, _, _ := params.Param(0, 0); v == 0 {
			l.line = l.line[:min(l.col, len(l.line))]
		} else if v == 2 {
			l.line, l.col = l.line[:0], 0
		}
	case 'G', '`': // CHA, HPA
		v, _, _ := params.Param(0, 1)
		l.col = max(0, min(v-1, l.max-1))
	case 'C', 'a': // CUF, HPR
		v, _, _ := params.Param(0, 1)
		l.col = min(l.col+max(v, 1), l.max-1)
	case 'D':
		v, _, _ := params.Param(0, 1)
		l.col = max(l.col-max(v, 1), 0)
	case 'I': // CHT
		v, _, _ := params.Param(0, 1)
		l.tab(min(max(v, 1), l.max))
	case 'Z': // CBT
		v, _, _ := params.Param(0, 1)
		for n := max(v, 1); n > 0 && l.col > 0; n-- {
			l.col = (l.col - 1) / 8 * 8
		}
	}
}

func (l *TextLines) endLine() {
	l.buf = l.buf[:0]
	for _, r := range l.line {
		if r != wideRest {
			l.buf = appendRune(l.buf, r)
		}
	}
	if l.emit != nil {
		l.emit(l.buf)
	}
	l.line, l.col = l.line[:0], 0
	if cap(l.line) > 4<<10 {
		l.line = nil
	}
}
