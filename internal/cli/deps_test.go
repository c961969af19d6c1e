package cli

import (
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tend-sh/tend/"

// TestDeps keeps the CLI from linking the daemon's internals (as
// tailscale's TestDeps does): the cli package imports from tend only the
// client, the vocabulary, human (the text forms the daemon's table shares),
// config (to find the socket), daemon (for up) and initproc (for init,
// which is PID 1 itself);
// the client imports only the vocabulary, all the way down.
func TestDeps(t *testing.T) {
	allowed := []string{"internal/client", "internal/program", "internal/human", "internal/config", "internal/daemon", "internal/initproc"}
	for _, imp := range moduleImports(t, ".") {
		if !slices.Contains(allowed, imp) {
			t.Errorf("internal/cli imports %s; it may import only %v", imp, allowed)
		}
	}
	if got := closure(t, "internal/client"); !slices.Equal(got, []string{"internal/program"}) {
		t.Errorf("internal/client depends on %v; it may depend only on internal/program", got)
	}
	// config and daemon are each used from one small file.
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for imp, only := range map[string]string{"internal/config": "config.go", "internal/daemon": "up.go", "internal/initproc": "init.go"} {
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
