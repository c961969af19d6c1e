package cli

import (
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tend-sh/tend/"

// TestDeps keeps the CLI from linking the daemon's internals (as
// tailscale's TestDeps does): the cli package imports from tend only the
// client, the vocabulary, human (the text forms the daemon's table shares),
// locate (to find the socket) and initproc (for init, which is PID 1
// itself); the daemon and the emulator come as Parts (parts.go). The
// client imports only the vocabulary, all the way down.
func TestDeps(t *testing.T) {
	allowed := []string{"internal/client", "internal/program", "internal/human", "internal/locate", "internal/initproc"}
	for _, imp := range moduleImports(t, ".") {
		if !slices.Contains(allowed, imp) {
			t.Errorf("internal/cli imports %s; it may import only %v", imp, allowed)
		}
	}
	if got := closure(t, "internal/client"); !slices.Equal(got, []string{"internal/program"}) {
		t.Errorf("internal/client depends on %v; it may depend only on internal/program", got)
	}
	// locate and initproc are each used from one small file.
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for imp, only := range map[string]string{"internal/locate": "config.go", "internal/initproc": "init.go"} {
		for _, f := range pkg.GoFiles {
			if f != only && fileImports(t, f, module+imp) {
				t.Errorf("%s imports %s; only %s should", f, imp, only)
			}
		}
	}
}

// moduleImports lists the non-test imports of the package in dir that are
// in this module, relative to the module root.
func moduleImports(t *testing.T, dir string) []string {
	t.Helper()
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range pkg.Imports {
		if rel, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

// closure lists every package of this module that pkg (relative to the
// module root) depends on, directly or not, sorted.
func closure(t *testing.T, pkg string) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, imp := range moduleImports(t, filepath.Join("..", "..", p)) {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(pkg)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// fileImports reports whether the Go file imports path.
func fileImports(t *testing.T, file, path string) bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range f.Imports {
		if strings.Trim(spec.Path.Value, `"`) == path {
			return true
		}
	}
	return false
}

// TestCLIPathDeps checks what the lean CLI (cmd/tend-lean, which imports
// only this package) links: walking the imports from this package reaches
// only the client, the vocabulary, human, locate, initproc and the reaper
// of tend, and of other modules only cobra, pflag, go-toml, x/sys and
// x/term (attach's raw mode); and the lean binary links neither net/http
// nor crypto/tls: no Prometheus client, no protobuf, no emulator, no
// WebSocket, whose package initialisers would run on every exec
// (docs/cli.md#two-files).
func TestCLIPathDeps(t *testing.T) {
	ours := map[string]bool{}
	others := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			rel, ok := strings.CutPrefix(imp, module)
			switch {
			case ok && !ours[rel]:
				ours[rel] = true
				walk(filepath.Join("..", "..", rel))
			case !ok && strings.Contains(strings.Split(imp, "/")[0], "."):
				others[imp] = true
			}
		}
	}
	walk(".")
	var got []string
	for p := range ours {
		got = append(got, p)
	}
	slices.Sort(got)
	if want := []string{"internal/client", "internal/human", "internal/initproc", "internal/locate", "internal/program", "internal/reaper"}; !slices.Equal(got, want) {
		t.Errorf("the CLI's verbs reach %v of tend; want only %v", got, want)
	}
	for imp := range others {
		if !slices.ContainsFunc([]string{"github.com/spf13/cobra", "github.com/spf13/pflag", "github.com/pelletier/go-toml/v2", "golang.org/x/sys/",
			"golang.org/x/term"},
			func(p string) bool { return strings.HasPrefix(imp, p) }) {
			t.Errorf("the CLI's verbs import %s", imp)
		}
	}
	out, err := exec.Command("go", "list", "-deps", "../../cmd/tend-lean").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/tend-lean: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "net/http" || p == "crypto/tls" || strings.HasPrefix(p, module+"internal/terminal") {
			t.Errorf("the lean CLI links %s", p)
		}
	}
}
