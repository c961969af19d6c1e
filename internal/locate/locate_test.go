package locate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// stateDirCases are documents and the state_dir they set ("" when none).
var stateDirCases = []struct {
	doc, want string
}{
	{"[daemon]\nstate_dir = \"s\"\n[program.x]\nbogus = 1\n", "s"},
	// Not TOML after [daemon]: the daemon is still found (its reload says what is wrong).
	{"[daemon]\nstate_dir = \"s\"\n[program.x]\ncommand = [\"a\"\n", "s"},
	{"[daemon]\nstate_dir = \"/abs/dir/\"\n", "/abs/dir/"},
	{"[program.x]\ncommand = [\"x\"]\n", ""},
	{"", ""},
	{"# a daemon\n[ daemon ] # here\r\n  'state_dir'\t=\t'C:\\x' # literal\n", `C:\x`},
	{"[\"daemon\"]\n\"state_dir\" = \"q\"\n", "q"},
	{"x = 1\n[program.a]\ncommand = [\n  \"daemon\",\n  [\"daemon\"], # [daemon]\n]\n[daemon]\nhttp = \"x\"\nstate_dir = \"late\"\n", "late"},
	// Text that looks like a header or a setting inside values.
	{"[program.a]\nshell = \"\"\"\n[daemon]\nstate_dir = \"evil\"\n\"\"\"\n", ""},
	{"[program.a]\nshell = '''\n[daemon]\nstate_dir = 'evil'\n'''\n[daemon]\nstate_dir = \"good\"\n", "good"},
	{"[program.a]\nshell = \"\"\"a\\\"\"\"\n[daemon]\nstate_dir = \"evil\"\n\"\"\"\n", ""},
	{"[program.a]\nshell = \"\"\"x\"\"\"\"\"\n[daemon]\nstate_dir = \"d\"\n", "d"},
	{"[program.a]\nenv = {daemon = \"x\", y = [1, {z = \"[daemon]\"}]}\n[daemon]\nstate_dir = \"d\"\n", "d"},
	{"[program.daemon]\nstate_dir = \"no\"\n", ""},
	{"[daemon]\nhttp = \"\"\"\nstate_dir = \"no\"\n\"\"\"\n", ""},
	{"[daemon]\nstate_dir = \"a\"\n[daemon.extra]\n", "a"},
	{"when = 1979-05-27 07:32:00Z\n[daemon]\nstate_dir = \"t\"\n", "t"},
	// Every other way TOML has to set it.
	{"daemon.state_dir = \"dotted\"\n", "dotted"},
	{"daemon = {state_dir = \"inline\", http = \"x\"}\n", "inline"},
	{"daemon = {}\n", ""},
	{"[daemon]\nstate_dir = \"e\\u0073c\"\n", "esc"},
	{"[daemon]\nstate_dir = \"\"\"\nml\"\"\"\n", "ml"},
	{"[daemon]\nstate_dir = 5\n", ""},
	{"[daemon]\nstate_dir.x = 5\n", ""},
	{"[daemon.state_dir]\nx = 1\n", ""},
	{"[\"d\\u0061emon\"]\nstate_dir = \"u\"\n", "u"},
	{"[daemon.x]\n[daemon]\nstate_dir = \"after\"\n", "after"},
}

func TestStateDir(t *testing.T) {
	for _, tc := range stateDirCases {
		if got, err := parse("f", []byte(tc.doc)); err != nil || got != tc.want {
			t.Errorf("parse(%q) = %q, %v; want %q", tc.doc, got, err, tc.want)
		}
		path := testutil.WriteFile(t, "tend.toml", tc.doc)
		want := filepath.Join(filepath.Dir(path), tc.want)
		if tc.want == "" {
			want = filepath.Join(filepath.Dir(path), ".tend")
		} else if filepath.IsAbs(tc.want) {
			want = filepath.Clean(tc.want)
		}
		if got, err := StateDir(path); err != nil || got != want {
			t.Errorf("StateDir(%q) = %q, %v; want %q", tc.doc, got, err, want)
		}
	}
}

// A file that does not say where its daemon is: file:line: key: what.
func TestStateDirErrors(t *testing.T) {
	for _, tc := range []struct{ doc, err string }{
		{"[daemon\n", ":1: expected ']' to close table name"},
		{"daemon = 1\n", ":1: daemon: must be a table like [daemon], not an integer"},
		{"x = 1\n[[daemon]]\nstate_dir = \"a\"\n", ":2: daemon: must be a table like [daemon], not an array of tables"},
		{"[program.a]\ncommand = [\"a\"\n[daemon]\n", ":3: "},
	} {
		path := testutil.WriteFile(t, "tend.toml", tc.doc)
		got, err := StateDir(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+tc.err) || !errors.Is(err, program.ErrBadConfig) {
			t.Errorf("%q: got %q, %v; want error %s%s", tc.doc, got, err, path, tc.err)
		}
	}
	_, err := StateDir(filepath.Join(t.TempDir(), "missing.toml"))
	if !errors.Is(err, program.ErrBadConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// A Procfile has no [daemon]: its state dir is .tend beside it.
func TestStateDirProcfile(t *testing.T) {
	path := testutil.WriteFile(t, "Procfile", "web: [daemon] state_dir = \"x\"\n")
	if got, err := StateDir(path); err != nil || got != filepath.Join(filepath.Dir(path), ".tend") {
		t.Errorf("Procfile: %q, %v", got, err)
	}
}

// A 10,000-program config whose [daemon] comes last (the whole document
// is read) or first (its first lines are).
func BenchmarkParse(b *testing.B) {
	var doc strings.Builder
	for i := range 10000 {
		doc.WriteString("[program.w" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "]\ncommand = [\"sleep\", \"1000\"]\nshell = \"\"\"\necho [daemon]\n\"\"\"\nenv = {A = \"1\"}\n\n")
	}
	daemon := "[daemon]\nstate_dir = \"s\"\n"
	for _, c := range []struct{ name, doc string }{{"last", doc.String() + daemon}, {"first", daemon + doc.String()}} {
		data := []byte(c.doc)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if sd, err := parse("tend.toml", data); err != nil || sd != "s" {
					b.Fatal(sd, err)
				}
			}
		})
	}
}

// The names Load, and so every client, takes for a Procfile.
func TestIsProcfile(t *testing.T) {
	for path, want := range map[string]bool{
		"Procfile": true, "/x/Procfile": true, "Procfile.dev": true, "app.procfile": true,
		"tend.toml": false, "procfile": false, "Procfile.toml.bak": true, "myProcfile": false,
	} {
		if got := IsProcfile(path); got != want {
			t.Errorf("IsProcfile(%q) = %v", path, got)
		}
	}
}
