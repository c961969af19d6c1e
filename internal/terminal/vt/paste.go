package vt

import "unicode/utf8"

// Bracketed paste: what a program that turned mode 2004 on reads as one
// pasted block (docs/terminal.md).
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// AppendPaste appends text wrapped as a bracketed paste, with every ESC
// and C1 control removed first, as xterm removes them from a paste: the
// text then cannot hold an end marker, whole or assembled from what a
// single removal pass leaves ("ESC[20 ESC[201~ 1~" is one), nor an 8-bit
// CSI (0x9b, raw or as the UTF-8 of U+009B) that a program taking C1
// controls would read as one. Invalid UTF-8 bytes 0x80-0x9f go too; every
// other byte, newlines and tabs included, is kept (docs/trust.md).
func AppendPaste(b []byte, text string) []byte {
	b = append(b, pasteStart...)
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if c != 0x1b {
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		drop := r >= 0x80 && r <= 0x9f || r == utf8.RuneError && n == 1 && c <= 0x9f
		if !drop {
			b = append(b, text[i:i+n]...)
		}
		i += n
	}
	return append(b, pasteEnd...)
}
