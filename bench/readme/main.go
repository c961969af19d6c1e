// Command readme derives the tables of README.md's Performance section from
// the committed raw results: bench/readme/perf.md.tmpl names, for every
// figure, the results directory (its stamp), the file and the JSON path or
// the line it is read from, and the target a verdict compares the raw figure
// with ("met" or **MISS**, never a rounded pass). It writes the markdown
// between the section's markers in README.md:
//
//	go run ./bench/readme            # rewrite README.md's tables
//	go run ./bench/readme -check     # exit 1 when README.md differs from the raw files
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

func run(root string, checkOnly bool) error {
	tmpl, err := os.ReadFile(filepath.Join(root, "bench", "readme", "perf.md.tmpl"))
	if err != nil {
		return err
	}
	got, err := render(root, string(tmpl))
	if err != nil {
		return err
	}
	path := filepath.Join(root, "README.md")
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
		return fmt.Errorf("README.md's Performance tables differ from bench/readme/perf.md.tmpl and the raw results: run go run ./bench/readme")
	}
	out := string(readme[:start]) + got + string(readme[end:])
	return os.WriteFile(path, []byte(out), 0o644)
}
