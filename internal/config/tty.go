package config

import (
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
)

// terminal reads tty and tty_size (docs/terminal.md): whether runs get a
// pseudo-terminal, and its size until a client resizes it. The size is checked whether or not tty
// is on, so a [defaults] size is right for every program that turns it on.
func (d *programDecoder) terminal(v view, s *program.Spec) {
	d.setBool(v, "tty", &s.Tty)
	var text string
	p, ok := d.setString(v, "tty_size", &text)
	if !ok {
		return
	}
	size, err := terminal.ParseSize(text)
	if err != nil {
		d.add(p, err.Error())
		return
	}
	s.TtyCols, s.TtyRows = size.Cols, size.Rows
}
