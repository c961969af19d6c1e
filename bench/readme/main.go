// Command readme derives the figures of README.md's Performance section,
// and of the bench READMEs that quote the same runs, from the committed raw
// results: a template (bench/readme/*.md.tmpl) names, for every figure, the
// results directory (its stamp), the file and the JSON path or the line it
// is read from, and the target a verdict compares the raw figure with
// ("met" or **MISS**, never a rounded pass). It writes the markdown between
// each file's markers:
//
//	go run ./bench/readme            # rewrite the generated parts
//	go run ./bench/readme -check     # exit 1 when one differs from the raw files
//
// The test of this package (run by the README's test command) fails when a
// figure of those tables has no stamp, is not read from a results file, or
// differs from its raw file; bench/README.md says how a new run's stamp
// gets into the template.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the module's root (README.md and bench/ under it)")
	checkOnly := flag.Bool("check", false, "only compare README.md with the raw files; exit 1 when they differ")
	flag.Parse()
	if err := run(*root, *checkOnly); err != nil {
		fmt.Fprintln(os.Stderr, "readme:", err)
		os.Exit(1)
	}
}

// pages are the generated parts: a template under bench/readme, the file
// whose markers it fills.
var pages = []struct{ tmpl, file string }{
	{"perf.md.tmpl", "README.md"},
	{"terminal.md.tmpl", "bench/terminal/README.md"},
}

func run(root string, checkOnly bool) error {
	for _, p := range pages {
		if err := page(root, p.tmpl, p.file, checkOnly); err != nil {
			return fmt.Errorf("%s: %w", p.file, err)
		}
	}
	return nil
}

func page(root, tmplName, file string, checkOnly bool) error {
	tmpl, err := os.ReadFile(filepath.Join(root, "bench", "readme", tmplName))
	if err != nil {
		return err
	}
	got, err := render(root, string(tmpl))
	if err != nil {
		return err
	}
	path := filepath.Join(root, file)
	readme, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cur, start, end, err := section(string(readme))
	if err != nil {
		return err
	}
	if cur == got {
		return nil
	}
	if checkOnly {
		return fmt.Errorf("the generated part differs from bench/readme/%s and the raw results: run go run ./bench/readme", tmplName)
	}
	out := string(readme[:start]) + got + string(readme[end:])
	return os.WriteFile(path, []byte(out), 0o644)
}
