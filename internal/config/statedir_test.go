package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// StateDir reads [daemon] state_dir alone: the rest of the file may be
// wrong, but it must be TOML.
func TestStateDir(t *testing.T) {
	for _, tc := range []struct{ doc, want, err string }{
		{"[daemon]\nstate_dir = \"s\"\n[program.x]\nbogus = 1\n", "s", ""},
		{"[daemon]\nstate_dir = \"/abs/dir/\"\n", "/abs/dir", ""},
		{"[daemon]\nstate_dir = 5\n", ".tend", ""},
		{"[program.x]\ncommand = [\"x\"]\n", ".tend", ""},
		{"[daemon]\nstate_dir = \"s\"\n[daemon]\n", "", ":3: daemon: defined twice (first on line 1)"},
		{"[daemon\n", "", ":1: daemon: expected ']' to close table name"},
		{"daemon = 1\n", "", ":1: daemon: must be a table, not an integer"},
	} {
		path := writeFile(t, "tend.toml", tc.doc)
		got, err := StateDir(path)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), path+tc.err) {
				t.Errorf("%q: got %q, %v; want error %s", tc.doc, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case got != filepath.Join(filepath.Dir(path), tc.want) && got != tc.want:
			t.Errorf("%q: state dir %q, want %q", tc.doc, got, tc.want)
		}
	}
}
