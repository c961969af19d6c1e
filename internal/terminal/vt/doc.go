// Package vt is the terminal emulator of tend's tty runs, and nothing
// else: the screen the program's bytes draw, the bytes tmux's key names
// type, and the text of a terminal's log. It holds no descriptor and
// makes no system call, so the API, the process layer and the CLI use it
// without linking the pty code of package terminal, which owns the
// master, reads it and feeds this package's Screen (docs/terminal.md).
//
// # The screen
//
// Screen keeps what a terminal of its size shows, byte by byte: cursor
// motion, erasures, scroll regions, insert and delete, the alternate
// screen, wide and combining characters, colours and attributes, line
// drawing, tab stops, the title. The bytes are parsed by the maintained
// VT500 state machine of github.com/charmbracelet/x/ansi; Screen carries
// out what they mean, on a grid of 8-byte cells (a character, a style
// number, a width) with per-screen tables of styles and multi-rune
// characters, as tmux's grid keeps its extended cells apart. Runs of
// plain ASCII and the controls CR, LF, BS and TAB, most of what a program
// writes, take a fast path a row at a time that leaves the screen exactly
// as the parser's path does (fast.go, FuzzFastPathMatchesParser). Any input is
// safe: invalid UTF-8 is dropped, sequences may be cut anywhere between
// two writes, and the work per byte and the memory are bounded
// (FuzzFeed). Where terminals disagree, tmux is the reference: its
// capture-pane is what Text must equal (the tests here replay bytes in
// both; package terminal's run bash, python3, vim, less and top under
// both). One deliberate difference: DEC line drawing shows as the lines
// (┌─┐), where tmux's capture prints the ASCII the program sent (lqk).
//
// Text is the screen as plain text, one line per row, trailing spaces
// trimmed, as `tmux capture-pane -p` prints a pane; ANSI adds colours
// and attributes; Snapshot is the API's object {"cols", "rows",
// "cursor": {"x", "y"}, "lines", "title", "changed_at"}. ChangedAt is when
// the content last changed: characters, erasures, scrolling, the
// alternate screen, the title, the size. The cursor moving, blinking or
// hiding is no change, nor is repainting what was there: a screen that
// changes is an agent in a turn. BracketedPaste and AppCursor are the
// modes input depends on. The screen answers the queries a program makes
// of its terminal (cursor position, device attributes, mode reports), as
// tmux does: TakeReplies hands the answers to whoever holds the terminal,
// so programs that wait for an answer start without a client. Replay
// feeds what a program wrote before the screen existed (the tail of its
// log) and drops the answers to it.
//
// Redraw is the byte sequence that paints the screen on a terminal
// whatever that showed before: both screens, the scroll region, the
// modes a program's input depends on, the title, the saved cursor, the
// cursor and the pen.
//
// Size is a terminal's size; ParseSize reads "120x40" and checks the
// bounds, 10x2 to 1000x500.
//
// # Input
//
// Input is text, then tmux's key names (KeyBytes: Enter, Escape, Tab,
// BTab, BSpace, Space, arrows, Home, End, PageUp, PageDown, IC, DC,
// F1…F12, C-a…C-z, M-x, S-/C-/M- on the named keys, KP0…KP9), then
// Enter. Text goes in as a bracketed paste when the program turned that
// mode on, unless Literal (keystrokes, as send-keys -l); arrows follow its
// cursor key mode, byte for byte as tmux's send-keys, and an item that is
// no key name (KeyBytes' ErrUnknownKey) is typed as it is written, as
// send-keys types it. Encode does not bound the input: the 64 KiB cap is
// checked where input enters tend (docs/terminal.md).
//
// # TextLines
//
// TextLines turns the raw bytes into log lines: control sequences removed
// (also when cut between writes), a carriage return overwriting its line
// as on a terminal (a progress bar leaves its last state), one line per
// newline.
//
// # Locking
//
// A Screen is not safe for concurrent use: its owner guards it (a
// Terminal with its lock). TextLines likewise.
package vt
