package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// errLookup is wrapped by every failure to find a figure in its raw file.
var errLookup = errors.New("figure not found")

// A fig is one figure read from a committed results file, with the stamp
// (the results directory's name) it comes from. Arithmetic on figs keeps
// every stamp, so a derived figure (a ratio, a per-run share) still names
// the runs it was derived from.
type fig struct {
	num    float64
	str    string // set for a text figure (an error message, a version)
	isStr  bool
	stamps []string
}

// stampRE is a results directory's stamp: a UTC time, maybe with a suffix.
var stampRE = regexp.MustCompile(`\d{8}T\d{6}Z`)

// stampOf names the run a results directory holds: its stamp, as the
// directory is named (bench/scale/results/20261203T220822Z-locate).
func stampOf(dir string) (string, error) {
	s := stampRE.FindString(filepath.Base(dir))
	if s == "" {
		return "", fmt.Errorf("%s: no results stamp in the directory's name: %w", dir, errLookup)
	}
	return filepath.Base(dir), nil
}

// source reads results files under root, each read once.
type source struct {
	root  string
	cache map[string][]byte
}

func (s *source) read(dir, file string) ([]byte, string, error) {
	stamp, err := stampOf(dir)
	if err != nil {
		return nil, "", err
	}
	p := filepath.Join(s.root, dir, file)
	if b, ok := s.cache[p]; ok {
		return b, stamp, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errLookup, err)
	}
	s.cache[p] = b
	return b, stamp, nil
}

// value is the template's `v DIR FILE PATH`: the JSON value at PATH (keys
// and array indexes joined by dots) of DIR/FILE. A .jsonl file is an array of
// its lines.
func (s *source) value(dir, file, path string) (fig, error) {
	b, stamp, err := s.read(dir, file)
	if err != nil {
		return fig{}, err
	}
	var doc any
	if strings.HasSuffix(file, ".jsonl") {
		var lines []any
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "{") {
				var x any
				if err := json.Unmarshal([]byte(l), &x); err != nil {
					return fig{}, fmt.Errorf("%s/%s: %w", dir, file, err)
				}
				lines = append(lines, x)
			}
		}
		doc = lines
	} else if err := json.Unmarshal(b, &doc); err != nil {
		return fig{}, fmt.Errorf("%s/%s: %w", dir, file, err)
	}
	cur := doc
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[k]
			if !ok {
				return fig{}, fmt.Errorf("%s/%s: %s: no %q: %w", dir, file, path, k, errLookup)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return fig{}, fmt.Errorf("%s/%s: %s: no index %q: %w", dir, file, path, k, errLookup)
			}
			cur = c[i]
		default:
			return fig{}, fmt.Errorf("%s/%s: %s: %q of a scalar: %w", dir, file, path, k, errLookup)
		}
	}
	switch c := cur.(type) {
	case float64:
		return fig{num: c, stamps: []string{stamp}}, nil
	case string:
		return fig{str: c, isStr: true, stamps: []string{stamp}}, nil
	case bool:
		return fig{str: strconv.FormatBool(c), isStr: true, stamps: []string{stamp}}, nil
	}
	return fig{}, fmt.Errorf("%s/%s: %s is no number or text: %w", dir, file, path, errLookup)
}

// match is the template's `re DIR FILE REGEXP`: the first group of the
// first match in a text file (a report.txt, env.txt), a number when it
// parses as one (thousands separators allowed).
func (s *source) match(dir, file, expr string) (fig, error) {
	b, stamp, err := s.read(dir, file)
	if err != nil {
		return fig{}, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return fig{}, err
	}
	m := re.FindSubmatch(b)
	if len(m) < 2 {
		return fig{}, fmt.Errorf("%s/%s: no match of %q: %w", dir, file, expr, errLookup)
	}
	t := string(m[1])
	if n, err := strconv.ParseFloat(strings.ReplaceAll(t, ",", ""), 64); err == nil {
		return fig{num: n, stamps: []string{stamp}}, nil
	}
	return fig{str: t, isStr: true, stamps: []string{stamp}}, nil
}

// operand turns a template argument into a fig: a fig, or a constant
// written in the template (a unit's size), which names no run.
func operand(x any) (fig, error) {
	switch v := x.(type) {
	case fig:
		if v.isStr {
			return fig{}, fmt.Errorf("arithmetic on the text %q", v.str)
		}
		return v, nil
	case int:
		return fig{num: float64(v)}, nil
	case float64:
		return fig{num: v}, nil
	}
	return fig{}, fmt.Errorf("arithmetic on %T", x)
}

func arith(op func(a, b float64) float64) func(a, b any) (fig, error) {
	return func(a, b any) (fig, error) {
		x, err := operand(a)
		if err != nil {
			return fig{}, err
		}
		y, err := operand(b)
		if err != nil {
			return fig{}, err
		}
		return fig{num: op(x.num, y.num), stamps: append(append([]string{}, x.stamps...), y.stamps...)}, nil
	}
}

// median of figs (the template's `median`), naming all their runs.
func median(xs ...fig) (fig, error) {
	if len(xs) == 0 {
		return fig{}, errors.New("median of nothing")
	}
	var v []float64
	var st []string
	for _, x := range xs {
		if x.isStr {
			return fig{}, fmt.Errorf("median of the text %q", x.str)
		}
		v = append(v, x.num)
		st = append(st, x.stamps...)
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fig{num: m, stamps: st}, nil
}

// Marks around each figure in the rendered text: the check of a row (check.go)
// reads which runs a row's figures come from, and what text is figures.
const (
	markOpen  = "\x02"
	markStamp = "\x03"
	markClose = "\x04"
)

func mark(f fig, text string) string {
	return markOpen + strings.Join(f.stamps, ",") + markStamp + text + markClose
}

// format is the template's `f DIGITS FIG`: the number with DIGITS decimals and
// thousands separators ("1,221.9"); a text figure as it is.
func format(digits int, f fig) string {
	if f.isStr {
		return mark(f, f.str)
	}
	return mark(f, thousands(strconv.FormatFloat(f.num, 'f', digits, 64)))
}

func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if len(intPart) > 3 {
		var b strings.Builder
		pre := len(intPart) % 3
		if pre > 0 {
			b.WriteString(intPart[:pre])
		}
		for i := pre; i < len(intPart); i += 3 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(intPart[i : i+3])
		}
		intPart = b.String()
	}
	if neg {
		intPart = "-" + intPart
	}
	if hasFrac {
		return intPart + "." + frac
	}
	return intPart
}

// verdict is the template's `verdict FIG OP LIMIT`: "met" when the raw
// figure (not its rounded text) satisfies OP ("<=", ">=") against LIMIT,
// else "**MISS**": 0.798 against ≥ 0.8 is a MISS however it prints.
func verdict(f fig, op string, limit any) (string, error) {
	l, err := operand(limit)
	if err != nil {
		return "", err
	}
	if f.isStr {
		return "", fmt.Errorf("verdict on the text %q", f.str)
	}
	var ok bool
	switch op {
	case "<=":
		ok = f.num <= l.num
	case ">=":
		ok = f.num >= l.num
	case "<":
		ok = f.num < l.num
	case ">":
		ok = f.num > l.num
	default:
		return "", fmt.Errorf("verdict: unknown comparison %q", op)
	}
	if math.IsNaN(f.num) {
		ok = false
	}
	if ok {
		return mark(f, "met"), nil
	}
	return mark(f, "**MISS**"), nil
}

// stopped is the template's `stopped FIG LIMIT`: a stop time in seconds, or
// "did not stop in LIMIT s" when the harness's graceful timeout ran out (its
// SIGKILL clean-up after the timeout is no stop time).
func stopped(f fig, limit int) (string, error) {
	if f.isStr {
		return "", fmt.Errorf("stopped: the text %q", f.str)
	}
	if f.num >= float64(limit) {
		return mark(f, fmt.Sprintf("did not stop in %d s", limit)), nil
	}
	return mark(f, strconv.FormatFloat(f.num, 'f', 1, 64)+" s"), nil
}

// each is the template's `each DIR FILE PATH FIELD`: FIELD of every element
// of the JSON array at PATH (a cell's runs), skipping runs without it (a
// failed run has no figure) — for `median`, `least` and `most` of a cell
// measured several times.
func (s *source) each(dir, file, path, field string) ([]fig, error) {
	var out []fig
	for i := 0; ; i++ {
		f, err := s.value(dir, file, path+"."+strconv.Itoa(i)+"."+field)
		if err == nil {
			out = append(out, f)
			continue
		}
		if _, err := s.value(dir, file, path+"."+strconv.Itoa(i)+".n"); err == nil {
			continue // a run without the field
		}
		break
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s/%s: %s: no run with %q: %w", dir, file, path, field, errLookup)
	}
	return out, nil
}

// extreme of figs: the least (sign 1) or the most (sign -1), naming all runs.
func extreme(sign float64) func(xs []fig) (fig, error) {
	return func(xs []fig) (fig, error) {
		if len(xs) == 0 {
			return fig{}, errors.New("extreme of nothing")
		}
		best := xs[0].num
		var st []string
		for _, x := range xs {
			if x.isStr {
				return fig{}, fmt.Errorf("extreme of the text %q", x.str)
			}
			if sign*x.num < sign*best {
				best = x.num
			}
			st = append(st, x.stamps...)
		}
		return fig{num: best, stamps: st}, nil
	}
}

// spread is the template's `spread DIGITS FIGS`: a cell measured several
// times as "median (least–most)", one run as its figure.
func spread(digits int, xs []fig) (string, error) {
	m, err := median(xs...)
	if err != nil {
		return "", err
	}
	if len(xs) == 1 {
		return format(digits, m), nil
	}
	lo, err := extreme(1)(xs)
	if err != nil {
		return "", err
	}
	hi, err := extreme(-1)(xs)
	if err != nil {
		return "", err
	}
	return format(digits, m) + " (" + format(digits, lo) + "–" + format(digits, hi) + ")", nil
}

// loaded is the template's `loaded DIR FILE PATH`: " ⚠ load L" when any run
// of the cell at PATH (or the object at PATH itself) began or ended above a
// load average of 2 (the harness's mark), else "".
func (s *source) loaded(dir, file, path string) (string, error) {
	var worst fig
	seen := false
	for _, p := range []string{path, path + ".0", path + ".1", path + ".2", path + ".3", path + ".4"} {
		for _, k := range []string{"load_start", "load_end"} {
			f, err := s.value(dir, file, p+"."+k)
			if err != nil || f.isStr {
				continue
			}
			if !seen || f.num > worst.num {
				worst, seen = f, true
			}
		}
	}
	if !seen || worst.num <= 2 {
		return "", nil
	}
	return " ⚠ load " + format(1, worst), nil
}

// divall is the template's `divall FIGS BY`: every figure divided (kB to MiB).
func divall(xs []fig, by any) ([]fig, error) {
	d := arith(func(a, b float64) float64 { return a / b })
	out := make([]fig, 0, len(xs))
	for _, x := range xs {
		y, err := d(x, by)
		if err != nil {
			return nil, err
		}
		out = append(out, y)
	}
	return out, nil
}

// outcome is the template's `outcome DIR FILE PATH FIELD DIGITS`: a cell's
// runs as `spread` shows them, with how many failed and why (the first
// run's error or stop_error); a cell whose every run failed shows the
// error, never a figure.
func (s *source) outcome(dir, file, path, field string, digits int) (string, error) {
	var why fig
	failed, runs := 0, 0
	for i := 0; ; i++ {
		p := path + "." + strconv.Itoa(i)
		if _, err := s.value(dir, file, p+".n"); err != nil {
			break
		}
		runs++
		keys := []string{"error"}
		if field == "stop_s" {
			keys = append(keys, "stop_error")
		}
		for _, k := range keys {
			if f, err := s.value(dir, file, p+"."+k); err == nil && f.isStr {
				if failed == 0 {
					why = f
				}
				failed++
				break
			}
		}
	}
	xs, err := s.each(dir, file, path, field)
	if err != nil {
		if failed == 0 {
			return "", err
		}
		return format(0, why), nil
	}
	out, err := spread(digits, xs)
	if err != nil || failed == 0 {
		return out, err
	}
	return out + fmt.Sprintf(" (%d of %d runs: ", failed, runs) + format(0, why) + ")", nil
}
