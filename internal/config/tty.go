package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/program"
)

// terminal reads tty, tty_history and tty_size (docs/terminal.md):
// whether runs get a pseudo-terminal, the lines of history kept above its
// screen, and its size until a client resizes it. The size is checked
// whether or not tty is on, so a [defaults] size is right for every
// program that turns it on.
func (d *programDecoder) terminal(v view, s *program.Spec) {
	d.setBool(v, "tty", &s.Tty)
	d.setInt(v, "tty_history", &s.TtyHistory, 0, maxTTYHistory)
	var text string
	p, ok := d.setString(v, "tty_size", &text)
	if !ok {
		return
	}
	cols, rows, err := parseTTYSize(text)
	if err != nil {
		d.add(p, err.Error())
		return
	}
	s.TtyCols, s.TtyRows = cols, rows
}

// The sizes a terminal may have, and the default: internal/terminal's
// (terminal.ParseSize, which a test holds this to). They are not taken from
// there so that the CLI, which reads configs, does not link the terminal
// emulator.
const (
	minTTYCols, maxTTYCols = 10, 1000
	minTTYRows, maxTTYRows = 2, 500
	defaultTTYCols         = 120
	defaultTTYRows         = 40

	defaultTTYHistory = 2000   // lines, as tmux's history-limit
	maxTTYHistory     = 100000 // lines: 50 times the default, a few MiB per run at most
)

// parseTTYSize reads COLSxROWS ("120x40") within the bounds, with
// terminal.ParseSize's errors.
func parseTTYSize(v string) (cols, rows int, err error) {
	c, r, ok := strings.Cut(strings.TrimSpace(v), "x")
	cols, err1 := strconv.Atoi(c)
	rows, err2 := strconv.Atoi(r)
	if !ok || err1 != nil || err2 != nil || strings.ContainsAny(c+r, "+- ") {
		return 0, 0, fmt.Errorf("terminal size %q is not COLSxROWS (for example 120x40)", v)
	}
	if cols < minTTYCols || cols > maxTTYCols || rows < minTTYRows || rows > maxTTYRows {
		return 0, 0, fmt.Errorf("terminal size %dx%d is out of range: columns %d to %d, rows %d to %d",
			cols, rows, minTTYCols, maxTTYCols, minTTYRows, maxTTYRows)
	}
	return cols, rows, nil
}
