package cli

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// screenOut draws what an attach receives on the caller's terminal, in one
// of two ways (docs/terminal.md, "Attach"):
//
//   - On the caller's alternate screen (tend attach), as tmux does: the run's
//     own switches between its main and alternate screens are taken out of
//     the stream, and where one was, the screen it switched to is painted
//     instead, so everything the run shows stays on the caller's alternate
//     screen and leaving it at the end gives the caller back its own
//     screen and scrollback.
//   - Inline (tend run -a --tty of a new run), as docker run -it does:
//     nothing is cleared. A connection's first message (the daemon's
//     redraw of the screen) is printed as the lines it shows from where the
//     cursor is, and the rest is the run's bytes as they are.
//
// A local screen follows the run's, so that what a switch leads to can be
// painted and what the end must undo is known.
type screenOut struct {
	mu     sync.Mutex // guards what follows: the pump writes, a SIGWINCH resizes
	w      io.Writer
	inline bool
	scr    Emulator
	first  bool   // the next message is a connection's first: a redraw
	shown  bool   // inline: a first redraw has been printed
	held   []byte // the start of a CSI cut at the end of the last message
	scroll bool   // the run turned alternate scroll (1007) on
}

func newScreenOut(screen func(cols, rows int) Emulator, w io.Writer, inline bool, cols, rows int) *screenOut {
	if cols <= 0 || rows <= 0 {
		cols, rows = 80, 24
	}
	scr := screen(min(max(cols, minCols), maxCols), min(max(rows, minRows), maxRows))
	return &screenOut{w: w, inline: inline, scr: scr, first: true}
}

// resize follows the caller's window, as the run's terminal does.
func (o *screenOut) resize(cols, rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.scr.Resize(min(max(cols, minCols), maxCols), min(max(rows, minRows), maxRows))
}

// reconnected says the next message is a new connection's redraw.
func (o *screenOut) reconnected() {
	o.mu.Lock()
	o.first = true
	o.mu.Unlock()
}

// The daemon's redraws (after an attach, a client that fell behind, a
// resize, a new run) begin and end so (the daemon's vt.Screen.Redraw): they are
// told apart from the run's own bytes in a message that holds both.
var (
	redrawStart = []byte("\x1b[?2026h\x1b[?1049l")
	redrawEnd   = []byte("\x1b[?2026l")
)

// Write draws one message of the connection: its redraws and the run's
// bytes between them.
func (o *screenOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	if bytes.Contains(p, []byte("\x1b[?1007h")) {
		o.scroll = true
	}
	var out []byte
	if o.first {
		// A connection's first message is a redraw, whatever it looks
		// like, and what came after it.
		o.first = false
		out = o.segment(out, p, true)
		p = nil
	}
	for len(p) > 0 {
		i := bytes.Index(p, redrawStart)
		if i < 0 {
			out = o.segment(out, p, false)
			break
		}
		out = o.segment(out, p[:i], false)
		end := len(p)
		if j := bytes.Index(p[i:], redrawEnd); j >= 0 {
			end = i + j + len(redrawEnd)
		}
		out = o.segment(out, p[i:end], true)
		p = p[end:]
	}
	_, err := o.w.Write(out)
	return n, err
}

// segment appends to out what draws p, a redraw of the daemon's or bytes
// of the run's.
func (o *screenOut) segment(out, p []byte, redraw bool) []byte {
	if len(p) == 0 {
		return out
	}
	if o.inline {
		return o.inlineSegment(out, p, redraw)
	}
	if redraw && len(o.held) > 0 {
		out = append(out, o.held...) // a sequence the redraw cut: the caller's terminal ends it
		o.held = nil
	}
	buf := append(o.held, p...)
	o.held = nil
	start := 0
	for i := 0; i < len(buf); {
		j := bytes.IndexByte(buf[i:], 0x1b)
		if j < 0 {
			break
		}
		j += i
		k, switches, rest, complete := scanPrivateMode(buf[j:])
		if !complete {
			o.held = append([]byte(nil), buf[j:]...)
			buf = buf[:j]
			break
		}
		if !switches {
			i = j + max(k, 1)
			continue
		}
		o.feed(buf[start : j+k])
		out = append(out, buf[start:j]...)
		out = append(out, rest...)
		if !redraw {
			// A redraw paints every screen it holds from the top, each
			// over the last: without its switches it leaves the one
			// shown on the caller's screen by itself. The run's own
			// switch needs the screen it switched to painted.
			out = o.redraw(out)
		}
		start = j + k
		i = start
	}
	o.feed(buf[start:])
	return append(out, buf[start:]...)
}

// feed brings the local screen up to date; the answers it would give the
// program are the daemon's to give, and are dropped.
func (o *screenOut) feed(p []byte) {
	o.scr.Feed(p)
	o.scr.TakeReplies(nil)
}

// redraw appends the paint of the screen the run shows now, without
// switching the caller's screens.
func (o *screenOut) redraw(b []byte) []byte {
	r := o.scr.Redraw(nil)
	r = bytes.ReplaceAll(r, []byte("\x1b[?1049l"), nil)
	r = bytes.ReplaceAll(r, []byte("\x1b[?1049h"), nil)
	return append(b, r...)
}

// inlineSegment prints the first redraw as lines from the cursor (once:
// a later redraw, after a resize or a reconnection, only brings the local
// screen up to date, since what it would paint is shown already, and a
// program that wants to repaint does so itself, as under docker), and the
// run's bytes as they are.
func (o *screenOut) inlineSegment(out, p []byte, redraw bool) []byte {
	o.feed(p)
	switch {
	case !redraw:
		return append(out, p...)
	case o.shown:
		return out
	}
	o.shown = true
	if o.scr.AltScreen() {
		// A full-screen program, already on its alternate screen: the
		// caller's terminal goes there too, as it would have with the
		// program's own bytes.
		return append(out, p...)
	}
	return append(out, o.inlineScreen()...)
}

// inlineScreen is the local screen's rows down to the last one in use,
// one line each, and the cursor where the program left it, with the modes
// its keys depend on.
func (o *screenOut) inlineScreen() []byte {
	scr := o.scr
	x, y := scr.Cursor()
	rows := bytes.Split(bytes.TrimSuffix([]byte(scr.ANSI()), []byte("\n")), []byte("\n"))
	last := y
	for i := len(rows) - 1; i > last; i-- {
		if len(bytes.TrimSpace(stripSGR(rows[i]))) > 0 {
			last = i
			break
		}
	}
	var b []byte
	for i := 0; i <= last && i < len(rows); i++ {
		if i > 0 {
			b = append(b, "\r\n"...)
		}
		b = append(b, rows[i]...)
	}
	b = append(b, "\x1b[0m\r"...)
	if last > y {
		b = append(b, "\x1b["+strconv.Itoa(last-y)+"A"...)
	}
	if x > 0 {
		b = append(b, "\x1b["+strconv.Itoa(x)+"C"...)
	}
	if scr.AppCursor() {
		b = append(b, "\x1b[?1h"...)
	}
	if scr.BracketedPaste() {
		b = append(b, "\x1b[?2004h"...)
	}
	if !scr.CursorVisible() {
		b = append(b, "\x1b[?25l"...)
	}
	return b
}

// stripSGR removes colour sequences, to tell a blank row from one in use.
func stripSGR(row []byte) []byte {
	var out []byte
	for len(row) > 0 {
		i := bytes.Index(row, []byte("\x1b["))
		if i < 0 {
			return append(out, row...)
		}
		out = append(out, row[:i]...)
		j := bytes.IndexByte(row[i:], 'm')
		if j < 0 {
			return out
		}
		row = row[i+j+1:]
	}
	return out
}

// leave returns what undoes, on the caller's terminal, every mode the run
// may have turned on (docs/terminal.md, "Detach"), and gives the caller
// its screen back: the alternate screen is left (tend attach; inline, only
// when the run left its own alternate screen on).
//
// The modes are reset whether or not the run turned them on, as tmux does
// when it leaves a terminal: each is off in a terminal that nobody asked
// for it, so turning it off is always right, and the stream passes
// through too many ways to turn each on (a redraw, a run before the
// attach) for tracking to be sure. Alternate scroll (1007) is the one
// exception: some terminals have it on by default, so it is turned off
// only when the run turned it on.
func (o *screenOut) leave() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := []byte(resetModes)
	if o.scroll {
		b = append(b, "\x1b[?1007l"...)
	}
	switch {
	case !o.inline:
		b = append(b, "\x1b[?1049l"...)
	case o.scr.AltScreen():
		b = append(b, "\x1b[?1049l\x1b[999;1H\r\n"...)
	}
	return b
}

// resetModes turns off what a program may have turned on in the caller's
// terminal: colours and attributes; bracketed paste; mouse reporting
// (X10, normal, button, any-event; UTF-8, SGR and urxvt encodings); focus
// events; application cursor keys and keypad; xterm's modifyOtherKeys
// (back to the terminal's default); the kitty keyboard protocol (its
// flags to 0 and its stack popped empty, which resets them all); the
// cursor's shape (the terminal's default) and visibility; the scroll
// region (which moves the cursor home: it is saved and restored around,
// so inline output keeps its place); the charset.
const resetModes = "\x1b[0m\x1b[?2004l" +
	"\x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l" +
	"\x1b[?1004l\x1b[?1l\x1b>" +
	"\x1b[>4m\x1b[=0;1u\x1b[<99u" +
	"\x1b[0 q\x1b[?25h\x1b7\x1b[r\x1b8\x1b(B"

// scanPrivateMode reads the escape sequence at the start of p (p[0] is
// ESC). It returns its length, whether it is a DEC private mode set or
// reset (CSI ? Pm h or l) that names a screen switch (47, 1047, 1049),
// and then what of it is left to send (the other modes it names, if any).
// complete is false when p ends before the sequence could be told.
func scanPrivateMode(p []byte) (n int, switches bool, rest []byte, complete bool) {
	const prefix = "\x1b[?"
	if len(p) < len(prefix) {
		return 0, false, nil, !bytes.HasPrefix([]byte(prefix), p)
	}
	if !bytes.HasPrefix(p, []byte(prefix)) {
		return 1, false, nil, true
	}
	k := len(prefix)
	for k < len(p) && (p[k] >= '0' && p[k] <= '9' || p[k] == ';') {
		k++
	}
	if k == len(p) {
		return 0, false, nil, k > 64 // a sequence longer than this is no mode to take out
	}
	final := p[k]
	if final != 'h' && final != 'l' {
		return k, false, nil, true
	}
	var others []string
	for m := range bytes.SplitSeq(p[len(prefix):k], []byte(";")) {
		switch string(m) {
		case "47", "1047", "1049":
			switches = true
		default:
			others = append(others, string(m))
		}
	}
	if !switches {
		return k + 1, false, nil, true
	}
	if len(others) > 0 {
		rest = []byte(prefix)
		for i, m := range others {
			if i > 0 {
				rest = append(rest, ';')
			}
			rest = append(rest, m...)
		}
		rest = append(rest, final)
	}
	return k + 1, true, rest, true
}
