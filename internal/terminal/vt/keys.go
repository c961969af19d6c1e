package vt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrUnknownKey is KeyBytes' error for a name that is no key's.
var ErrUnknownKey = errors.New("unknown key name")

// Input is what to type into a terminal: text, then keys, then Enter
// when asked. Text goes in as a bracketed paste when the program turned
// that mode on, unless Literal, else as it is (keystrokes).
type Input struct {
	Text    string
	Keys    []string // tmux's key names (Enter, C-c, M-x, Up, F5, …), or text typed as written
	Enter   bool
	Literal bool // the text as keystrokes, never a paste (tmux's send-keys -l)
}

// Encode returns the bytes Input types into a terminal in the given modes.
// A key that is no key name is typed as it is written, as tmux's
// send-keys types it (":set nu"); it is never pasted. Each key name is
// parsed here, once. Encode does not bound the input: the cap is checked
// where input enters tend (docs/terminal.md), before it comes here.
func (in Input) Encode(bracketedPaste, appCursor bool) []byte {
	var b []byte
	if in.Text != "" {
		if bracketedPaste && !in.Literal {
			b = AppendPaste(b, in.Text)
		} else {
			b = append(b, in.Text...)
		}
	}
	for _, k := range in.Keys {
		kb, err := KeyBytes(k, appCursor)
		if err != nil {
			kb = []byte(k) // no key's name: its text, as tmux types it
		}
		b = append(b, kb...)
	}
	if in.Enter {
		b = append(b, '\r')
	}
	return b
}

// keyCode is a key's index in the tables below.
type specialKey struct {
	plain   string // what it sends unmodified
	appMode string // with application cursor keys, when different
	mod     string // with modifiers: "_" stands for the xterm modifier number
}

// special are the keys tmux sends as sequences (its input-keys.c).
var special = map[string]specialKey{
	"up":      {"\x1b[A", "\x1bOA", "\x1b[1;_A"},
	"down":    {"\x1b[B", "\x1bOB", "\x1b[1;_B"},
	"right":   {"\x1b[C", "\x1bOC", "\x1b[1;_C"},
	"left":    {"\x1b[D", "\x1bOD", "\x1b[1;_D"},
	"home":    {"\x1b[1~", "", "\x1b[1;_H"},
	"end":     {"\x1b[4~", "", "\x1b[1;_F"},
	"ic":      {"\x1b[2~", "", "\x1b[2;_~"},
	"dc":      {"\x1b[3~", "", "\x1b[3;_~"},
	"ppage":   {"\x1b[5~", "", "\x1b[5;_~"},
	"npage":   {"\x1b[6~", "", "\x1b[6;_~"},
	"btab":    {"\x1b[Z", "", ""},
	"f1":      {"\x1bOP", "", "\x1b[1;_P"},
	"f2":      {"\x1bOQ", "", "\x1b[1;_Q"},
	"f3":      {"\x1bOR", "", "\x1b[1;_R"},
	"f4":      {"\x1bOS", "", "\x1b[1;_S"},
	"f5":      {"\x1b[15~", "", "\x1b[15;_~"},
	"f6":      {"\x1b[17~", "", "\x1b[17;_~"},
	"f7":      {"\x1b[18~", "", "\x1b[18;_~"},
	"f8":      {"\x1b[19~", "", "\x1b[19;_~"},
	"f9":      {"\x1b[20~", "", "\x1b[20;_~"},
	"f10":     {"\x1b[21~", "", "\x1b[21;_~"},
	"f11":     {"\x1b[23~", "", "\x1b[23;_~"},
	"f12":     {"\x1b[24~", "", "\x1b[24;_~"},
	"enter":   {"\r", "", ""},
	"escape":  {"\x1b", "", ""},
	"tab":     {"\t", "", ""},
	"bspace":  {"\x7f", "", ""},
	"space":   {" ", "", ""},
	"kpenter": {"\n", "", ""},
	"kp0":     {"0", "", ""},
	"kp1":     {"1", "", ""},
	"kp2":     {"2", "", ""},
	"kp3":     {"3", "", ""},
	"kp4":     {"4", "", ""},
	"kp5":     {"5", "", ""},
	"kp6":     {"6", "", ""},
	"kp7":     {"7", "", ""},
	"kp8":     {"8", "", ""},
	"kp9":     {"9", "", ""},
	"kp/":     {"/", "", ""},
	"kp*":     {"*", "", ""},
	"kp-":     {"-", "", ""},
	"kp+":     {"+", "", ""},
	"kp.":     {".", "", ""},
}

// aliases are tmux's other names for the same keys.
var aliases = map[string]string{
	"pageup": "ppage", "pgup": "ppage", "pagedown": "npage", "pgdn": "npage",
	"insert": "ic", "delete": "dc", "esc": "escape",
}

// KeyBytes returns what the key named name (as tmux's send-keys names it:
// Enter, Escape, Tab, BTab, BSpace, Space, Up, Down, Left, Right, Home,
// End, PageUp, PageDown, IC, DC, F1…F12, KP0…KP9, with C-, M- and S-
// prefixes, C-a…C-z, ^a, or a single character) sends to a program, with
// arrows as application cursor keys when appCursor. Names are matched
// without regard to case, except a single character. A name that is no
// key's is an error wrapping ErrUnknownKey.
func KeyBytes(name string, appCursor bool) ([]byte, error) {
	ctrl, meta, shift := false, false, false
	rest := name
	for len(rest) > 2 && rest[1] == '-' {
		switch rest[0] {
		case 'C', 'c':
			ctrl = true
		case 'M', 'm':
			meta = true
		case 'S', 's':
			shift = true
		default:
			return nil, unknownKey(name)
		}
		rest = rest[2:]
	}
	if len(rest) == 2 && rest[0] == '^' {
		ctrl, rest = true, rest[1:]
	}
	if rest == "" {
		return nil, unknownKey(name)
	}
	lower := strings.ToLower(rest)
	if a, ok := aliases[lower]; ok {
		lower = a
	}
	if k, ok := special[lower]; ok && utf8.RuneCountInString(rest) > 1 {
		return specialBytes(k, name, lower, ctrl, meta, shift, appCursor)
	}
	r, size := utf8.DecodeRuneInString(rest)
	if size != len(rest) || r == utf8.RuneError {
		return nil, unknownKey(name)
	}
	if shift {
		return nil, unknownKey(name)
	}
	var b []byte
	if meta {
		b = append(b, 0x1b)
	}
	if ctrl {
		c, ok := ctrlChar(r)
		if !ok {
			return nil, unknownKey(name)
		}
		return append(b, c), nil
	}
	return utf8.AppendRune(b, r), nil
}

// specialBytes encodes a named key with its modifiers, as tmux does: an
// xterm modifier parameter (2 shift, 3 meta, 5 ctrl, and their sums) for
// keys that have one, ESC before the others for meta.
func specialBytes(k specialKey, name, lower string, ctrl, meta, shift, appCursor bool) ([]byte, error) {
	m := 1
	if shift {
		m++
	}
	if meta {
		m += 2
	}
	if ctrl {
		m += 4
	}
	switch {
	case m == 1 && appCursor && k.appMode != "":
		return []byte(k.appMode), nil
	case m == 1:
		return []byte(k.plain), nil
	case k.mod != "":
		return []byte(strings.Replace(k.mod, "_", string(rune('0'+m)), 1)), nil
	case lower == "space" && ctrl && !shift:
		return prefixMeta(meta, 0), nil
	case lower == "tab" && shift && !ctrl:
		return prefixMeta(meta, []byte("\x1b[Z")...), nil
	case meta && !ctrl && !shift:
		return prefixMeta(true, []byte(k.plain)...), nil
	}
	return nil, unknownKey(name)
}

func prefixMeta(meta bool, b ...byte) []byte {
	if meta {
		return append([]byte{0x1b}, b...)
	}
	return b
}

// ctrlChar is the control character C-r types.
func ctrlChar(r rune) (byte, bool) {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r - 'a' + 1), true
	case r >= '@' && r <= '_': // C-@, C-A…C-Z, C-[, C-\, C-], C-^, C-_
		return byte(r - '@'), true
	case r == ' ' || r == '2':
		return 0, true
	case r == '6':
		return 0x1e, true
	case r == '-' || r == '/':
		return 0x1f, true
	case r == '?':
		return 0x7f, true
	case r == '|':
		return 0x1c, true
	}
	return 0, false
}

func unknownKey(name string) error { return fmt.Errorf("%w %q", ErrUnknownKey, name) }
