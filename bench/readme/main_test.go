package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

// The generated parts (README.md's Performance tables, bench/terminal's
// results) are their templates rendered against the committed raw results: a
// figure edited by hand, a stamp missing from its row, or a raw file changed
// under a quoted figure fails here.
func TestReadmesMatchRawResults(t *testing.T) {
	for _, p := range pages {
		t.Run(p.file, func(t *testing.T) {
			tmpl, err := os.ReadFile(filepath.Join(root, "bench", "readme", p.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			want, err := render(root, string(tmpl))
			if err != nil {
				t.Fatalf("the template's figures: %v", err)
			}
			readme, err := os.ReadFile(filepath.Join(root, p.file))
			if err != nil {
				t.Fatal(err)
			}
			got, _, _, err := section(string(readme))
			if err != nil {
				t.Fatal(err)
			}
			if got == want {
				return
			}
			gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
			for i := 0; i < len(gl) || i < len(wl); i++ {
				var g, w string
				if i < len(gl) {
					g = gl[i]
				}
				if i < len(wl) {
					w = wl[i]
				}
				if g != w {
					t.Fatalf("%s differs from the raw results (run go run ./bench/readme), first at line %d of its generated part:\nfile: %s\nraw:  %s", p.file, i+1, g, w)
				}
			}
		})
	}
}

func TestCheckRefusesAFigureNotReadFromAFile(t *testing.T) {
	tmpl := "| | tend | target |\n|---|---|---|\n| a row (`20261203T202406Z`) | 0.83 ms | ≤ 1 ms |\n"
	if _, err := check(tmpl); !errors.Is(err, errRow) {
		t.Fatalf("a literal figure in a table cell: err %v, want errRow", err)
	}
}

func TestCheckRefusesAFigureWithoutItsStamp(t *testing.T) {
	f := fig{num: 0.83, stamps: []string{"20261203T202406Z"}}
	row := "| | tend | target |\n|---|---|---|\n| a row | " + format(2, f) + " ms | ≤ 1 ms |\n"
	if _, err := check(row); !errors.Is(err, errRow) {
		t.Fatalf("a figure whose row does not name its run: err %v, want errRow", err)
	}
	named := "| | tend | target |\n|---|---|---|\n| a row (`20261203T202406Z`) | " + format(2, f) + " ms | ≤ 1 ms |\n"
	out, err := check(named)
	if err != nil {
		t.Fatalf("a figure with its stamp: %v", err)
	}
	if !strings.Contains(out, "| 0.83 ms |") || strings.ContainsAny(out, markOpen+markStamp+markClose) {
		t.Fatalf("marks not stripped: %q", out)
	}
}

func TestVerdictComparesTheRawFigure(t *testing.T) {
	f := fig{num: 0.798, stamps: []string{"20261203T190200Z"}}
	got, err := verdict(f, ">=", 0.8)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "**MISS**") {
		t.Fatalf("0.798 against >= 0.8: %q, want a MISS (it prints as 0.80)", got)
	}
	if s := format(2, f); !strings.Contains(s, "0.80") {
		t.Fatalf("format: %q", s)
	}
}

func TestStoppedSaysATimeout(t *testing.T) {
	got, err := stopped(fig{num: 128.8}, 120)
	if err != nil || !strings.Contains(got, "did not stop in 120 s") {
		t.Fatalf("stopped(128.8): %q, %v", got, err)
	}
}

func TestValueReadsAStampedFile(t *testing.T) {
	s := &source{root: root, cache: map[string][]byte{}}
	f, err := s.value("bench/peers/results/20261203T202406Z", "latency.json", "tools.tend.fork_ms.n")
	if err != nil {
		t.Fatal(err)
	}
	if f.num <= 0 || len(f.stamps) != 1 || f.stamps[0] != "20261203T202406Z" {
		t.Fatalf("got %+v", f)
	}
	if _, err := s.value("bench/peers/results/20261203T202406Z", "latency.json", "tools.nosuch"); !errors.Is(err, errLookup) {
		t.Fatalf("a missing key: %v", err)
	}
	if _, err := s.value("bench/peers/results", "x.json", "a"); !errors.Is(err, errLookup) {
		t.Fatalf("a directory without a stamp: %v", err)
	}
}

func TestEachReadsEveryRunOfACell(t *testing.T) {
	s := &source{root: root, cache: map[string][]byte{}}
	const p = "bench/peers/results/20261203T202406Z"
	xs, err := s.each(p, "scale_100_1000.json", "tools.tend.1000", "up_s")
	if err != nil || len(xs) != 1 {
		t.Fatalf("tend's runs at 1,000: %v, %v", xs, err)
	}
	m, err := median(xs...)
	if err != nil || m.num != xs[0].num {
		t.Fatalf("median of one run: %+v, %v", m, err)
	}
	if lo, err := extreme(1)(xs); err != nil || lo.num != xs[0].num {
		t.Fatalf("least: %+v, %v", lo, err)
	}
	// pm2 crashed at 10,000: its one run has no up_s, so the cell has no figure.
	if _, err := s.each(p, "scale_10000.json", "tools.pm2.10000", "up_s"); !errors.Is(err, errLookup) {
		t.Fatalf("a cell whose runs all failed: %v", err)
	}
}

// peers-next.md.tmpl is the table for the harness's next full run: it must
// read the JSON the harness writes now (a quick-mode fixture stands in for
// the run, its sizes set in the template's header).
func TestNextPeersTableReadsTheHarnessJSON(t *testing.T) {
	b, err := os.ReadFile("peers-next.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := string(b)
	for _, r := range [][2]string{
		{`$p := "bench/peers/results/STAMP"`, `$p := "bench/peers/results/20261206T045826Z"`},
		{`$n := "1000"`, `$n := "20"`}, {`$N := "10000"`, `$N := "20"`},
		{`$S := "scale_100_1000.json"`, `$S := "scale_20.json"`}, {`$T := "scale_10000.json"`, `$T := "scale_20.json"`},
		{`$rn := "1000"`, `$rn := "50"`}, {`$RN := "10000"`, `$RN := "50"`},
		{`$un := "10000"`, `$un := "50"`}, {`$tn := "10000"`, `$tn := "30"`},
	} {
		if !strings.Contains(tmpl, r[0]) {
			t.Fatalf("the template's header has no %s", r[0])
		}
		tmpl = strings.Replace(tmpl, r[0], r[1], 1)
	}
	out, err := render("testdata/next", tmpl)
	if err != nil {
		t.Fatalf("rendering against the fixture: %v", err)
	}
	if os.Getenv("READMETEST_SHOW") != "" {
		t.Log(out)
	}
	for _, want := range []string{"`20261206T045826Z`", "p50 / p95 / p99", "cold: the first call", "met"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered table lacks %q:\n%s", want, out)
		}
	}
}
