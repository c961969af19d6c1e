package config

import (
	"testing"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// tty_size reads as vt.ParseSize reads it: the same sizes, the same
// bounds, the same errors; and the default is the terminal's.
func TestTTYSizeIsTheTerminals(t *testing.T) {
	for _, v := range []string{"120x40", "10x2", "1000x500", "9x2", "10x1", "1001x40", "80x501", " 80x24 ",
		"80X24", "80x", "x24", "80x24x1", "+80x24", "-80x24", "80 x24", "", "0x0", "99999999999999999999x2"} {
		cols, rows, err := parseTTYSize(v)
		size, terr := vt.ParseSize(v)
		if (err == nil) != (terr == nil) || err != nil && err.Error() != terr.Error() || err == nil && (cols != size.Cols || rows != size.Rows) {
			t.Errorf("%q: config %dx%d %v, terminal %v %v", v, cols, rows, err, size, terr)
		}
	}
	if defaultTTYCols != vt.DefaultSize.Cols || defaultTTYRows != vt.DefaultSize.Rows {
		t.Errorf("default %dx%d, the terminal's %v", defaultTTYCols, defaultTTYRows, vt.DefaultSize)
	}
}

func FuzzTTYSize(f *testing.F) {
	f.Add("120x40")
	f.Add("9x2")
	f.Fuzz(func(t *testing.T, v string) {
		cols, rows, err := parseTTYSize(v)
		size, terr := vt.ParseSize(v)
		if (err == nil) != (terr == nil) || err != nil && err.Error() != terr.Error() || err == nil && (cols != size.Cols || rows != size.Rows) {
			t.Errorf("%q: config %dx%d %v, terminal %v %v", v, cols, rows, err, size, terr)
		}
	})
}
