package human

import (
	"io"
	"strings"
	"unicode/utf8"
)

// What a supervised program writes (its STATUS= text, its command line, a
// probe's output, labels, names, its screen, its log) reaches the
// operator's terminal through these functions: every control a terminal
// could act on is written as an escape a person can read, so no program
// can set the clipboard (OSC 52), the title, or hide and reorder lines
// (docs/trust.md). Escapes look like Go's: C0 controls and DEL as "\x1b"
// (newline, tab and carriage return as "\n", "\t", "\r"), C1 controls and
// bidirectional formatting as "\u009b", "\u202e", a byte that is not
// UTF-8 as "\xff". JSON output does not come here: it keeps the text.

// Escape is s for one cell or one line: every control escaped, newlines and
// tabs too, so a value cannot break a table's rows or columns.
func Escape(s string) string {
	if clean(s, false) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), s, false))
}

// EscapeText is s for a block of lines: as Escape, but newlines and tabs
// are kept.
func EscapeText(s string) string {
	if clean(s, true) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), s, true))
}

// NewWriter returns a writer that writes to w what it is given escaped as
// EscapeText escapes it, for a printer of many lines (doctor, errors).
// Each Write must hold whole runes, as fmt's Fprint calls do: a rune cut
// in two is escaped as bytes that are not UTF-8.
func NewWriter(w io.Writer) io.Writer { return textWriter{w} }

type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	s := string(p)
	if clean(s, true) {
		return t.w.Write(p)
	}
	if _, err := t.w.Write(appendEscaped(nil, s, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// EscapeColour is EscapeText keeping SGR sequences (ESC [ digits ; : m:
// colours and attributes), which only change how text looks; every other
// sequence has its ESC (or C1 introducer) and controls escaped, which
// leaves it printable text. tend logs uses it for a terminal. The SGR
// check is a few lines here rather than charmbracelet/x/ansi's parser: the
// CLI's verbs do not link that (cli's TestCLIPathDeps), and only one
// sequence, complete and strict, is ever kept.
func EscapeColour(s string) string {
	if clean(s, true) {
		return s
	}
	var b []byte
	for {
		i := strings.IndexByte(s, 0x1b)
		if i < 0 {
			break
		}
		b = appendEscaped(b, s[:i], true)
		if n := sgrLen(s[i:]); n > 0 {
			b = append(b, s[i:i+n]...)
			s = s[i+n:]
		} else {
			b = appendEscaped(b, s[i:i+1], true)
			s = s[i+1:]
		}
	}
	return string(appendEscaped(b, s, true))
}

// sgrLen is the length of the SGR sequence s starts with, 0 if it starts
// with none.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case c >= '0' && c <= '9', c == ';', c == ':':
		default:
			return 0
		}
	}
	return 0
}

// clean says whether s has nothing to escape: the common case, checked
// without allocating.
func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
		case (c == '\n' || c == '\t') && keepLines:
		case c >= utf8.RuneSelf:
			return cleanFrom(s[i:])
		default:
			return false
		}
	}
	return true
}

// cleanFrom is clean of a string past its ASCII start.
func cleanFrom(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || isControlRune(r) {
			return false
		}
		i += n
	}
	return true
}

// isControlRune: the C1 controls and the bidirectional formatting
// characters that can reorder what a line shows (Trojan Source,
// CVE-2021-42574).
func isControlRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f,
		r >= 0x202a && r <= 0x202e,            // LRE, RLE, PDF, LRO, RLO
		r >= 0x2066 && r <= 0x2069,            // LRI, RLI, FSI, PDI
		r == 0x200e, r == 0x200f, r == 0x061c: // LRM, RLM, ALM
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s to b with every control escaped, newlines and
// tabs kept when keepLines.
func appendEscaped(b []byte, s string, keepLines bool) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c < 0x7f, (c == '\n' || c == '\t') && keepLines:
				b = append(b, c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c == '\r':
				b = append(b, `\r`...)
			default:
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		case isControlRune(r):
			b = append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}

// EscapeJSON returns the JSON text b with DEL, every C1 control and every
// bidirectional control written as a \u escape: the same JSON value (they
// can stand only inside strings, where the escape means the same
// character), but nothing a terminal would act on when the JSON is printed
// on one. The encoder already escapes C0 controls; b is returned as it is
// when there is nothing to escape.
func EscapeJSON(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		r, n := rune(b[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(b[i:])
		}
		if r == 0x7f || r >= utf8.RuneSelf && isControlRune(r) {
			if out == nil {
				out = make([]byte, 0, len(b)+16)
			}
			out = append(out, b[last:i]...)
			out = append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
			last = i + n
		}
		i += n
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
