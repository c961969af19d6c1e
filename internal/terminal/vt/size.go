package vt

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a terminal's size in character cells.
type Size struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// The sizes a terminal may have, from 10x2 to 1000x500.
const (
	MinCols, MaxCols = 10, 1000
	MinRows, MaxRows = 2, 500
)

// DefaultSize is a terminal's size until a client resizes it (tty_size's
// default).
var DefaultSize = Size{Cols: 120, Rows: 40}

// String is COLSxROWS.
func (s Size) String() string { return strconv.Itoa(s.Cols) + "x" + strconv.Itoa(s.Rows) }

// Valid reports whether s is within the bounds, with an error naming them.
func (s Size) Valid() error {
	if s.Cols < MinCols || s.Cols > MaxCols || s.Rows < MinRows || s.Rows > MaxRows {
		return fmt.Errorf("terminal size %s is out of range: columns %d to %d, rows %d to %d",
			s, MinCols, MaxCols, MinRows, MaxRows)
	}
	return nil
}

// ParseSize reads COLSxROWS ("120x40") and checks the bounds.
func ParseSize(v string) (Size, error) {
	c, r, ok := strings.Cut(strings.TrimSpace(v), "x")
	cols, err1 := strconv.Atoi(c)
	rows, err2 := strconv.Atoi(r)
	if !ok || err1 != nil || err2 != nil || strings.ContainsAny(c+r, "+- ") {
		return Size{}, fmt.Errorf("terminal size %q is not COLSxROWS (for example 120x40)", v)
	}
	s := Size{Cols: cols, Rows: rows}
	return s, s.Valid()
}
