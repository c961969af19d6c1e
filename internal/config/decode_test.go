package config

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

// tomlRules are documents on each TOML 1.0 rule decodeTOML enforces, and
// whether they are TOML. Each is checked against toml.Unmarshal too.
var tomlRules = []struct {
	doc string
	ok  bool
}{
	// Tables defined twice, directly or through their parts.
	{"[a]\n[a]\n", false},
	{"[a.b]\n[a]\n", true},
	{"[a.b]\n[a]\n[a]\n", false},
	{"[a]\nb = 1\n[a.b]\n", false},
	{"[a]\nb = {}\n[a.b.c]\n", false},
	{"[a]\nb.c = 1\n[a.b]\n", false},
	{"[a]\nb.c = 1\n[a.b.d]\n", true},
	{"[a]\nb.c = 1\n[a.b.c.d]\n", false},
	{"[a.b.c]\n[a]\nb.d = 1\n", false},
	{"[a.b]\nc = 1\n[a]\nd = 2\n", true},
	{"a.b = 1\n[a]\n", false},
	{"a = 1\n[a]\n", false},
	{"a = 1\n[a.b]\n", false},
	{"a = {}\n[a]\n", false},
	{"a = {b = 1}\na.c = 2\n", false},
	{"\"a.b\" = 1\na.b = 2\n", true},
	{"a.'b' = 1\n'a'.\"b\" = 2\n", false},
	// Keys defined twice.
	{"a = 1\na = 2\n", false},
	{"a = 1\nA = 2\n", true},
	{"a.b = 1\na.b = 2\n", false},
	{"a.b = 1\na.c = 2\na.b.d = 3\n", false},
	{"a.b.c = 1\na.b.d = 2\n", true},
	{"[t]\nx = 1\n[u]\nx = 1\n[t.v]\nx = 1\n", true},
	// Inline tables: closed once written.
	{"a = {b = 1, b = 2}\n", false},
	{"a = {b.c = 1, b.d = 2}\n", true},
	{"a = {b = {}, b.c = 1}\n", false},
	{"a = {b.c = 1, b = 2}\n", false},
	{"a = [{b = 1, b = 2}]\n", false},
	{"a = [[{b = 1}, {b = 1, c = {d = 1, d = 2}}]]\n", false},
	{"a = [{b = 1}, {b = 2}]\n", true},
	{"a = {x = [{y = 1}], z = {w = [1, 'a', 2.5, {}]}}\n", true},
	// Arrays of tables and their sub-tables.
	{"[[x]]\n[[x]]\n", true},
	{"[[x]]\n[x.y]\n[[x]]\n[x.y]\n", true},
	{"[[x]]\n[x.y]\n[x.y]\n", false},
	{"[[x]]\na = 1\n[[x]]\na = 2\n", true},
	{"[[x]]\n[x]\n", false},
	{"[x]\n[[x]]\n", false},
	{"[x.y]\n[[x]]\n", false},
	{"x = []\n[[x]]\n", false},
	{"x = [{}]\n[[x]]\n", false},
	{"[[x.y]]\n[x]\n", true},
	{"[[x]]\n[[x.y]]\n[[x.y]]\n[[x]]\n[[x.y]]\n", true},
	{"[[x]]\n[[x.y]]\n[x.y.z]\n[[x.y]]\n[x.y.z]\n", true},
	{"a.b = 1\n[[a.c]]\n", true},
	{"[[a]]\nb.c = 1\n[a.b.d]\n", true},
	{"[[a]]\nb.c = 1\n[a.b]\n", false},
	// Integers.
	{"a = 1_000\nb = 0xdead_BEEF\nc = 0o755\nd = 0b1010\ne = +7\nf = -0\n", true},
	{"a = 9223372036854775807\nb = -9223372036854775808\n", true},
	{"a = 9223372036854775808\n", false},
	{"a = -9223372036854775809\n", false},
	{"a = 0x7FFFFFFFFFFFFFFF\nb = 0o777777777777777777777\n", true},
	{"a = 0x8000000000000000\n", false},
	{"a = 0b" + strings.Repeat("1", 64) + "\n", false},
	{"a = 1__0\n", false},
	{"a = 01\n", false},
	{"a = 0x\n", false},
	// Floats.
	{"a = 1.5\nb = -0.0\nc = 1e10\nd = 6.626e-34\ne = 1_000.000_1\nf = 5E+22\n", true},
	{"a = inf\nb = +inf\nc = -inf\nd = nan\ne = +nan\nf = -nan\n", true},
	{"a = 1e400\n", false},
	{"a = 1e-400\n", true},
	{"a = 1.\n", false},
	{"a = .5\n", false},
	{"a = 0.1234567890123456789012345\n", true},
	// Strings, unescaped by the parser.
	{`a = "tab\there \u00e9 \U0001F600 \"q\" \\"` + "\nb = 'lit\\eral'\n", true},
	{"a = \"\"\"\nline\\\n   joined\"\"\"\nb = '''\nraw\\n'''\n", true},
	{"a = \"\\x41\"\n", true}, // TOML 1.1, as go-toml
	{"a = \"\\q\"\n", false},
	{"a = \"open\n", false},
	// Mixed arrays, dates and times.
	{"a = [1, 'two', 3.0, true, [4], {five = 5}, 1979-05-27]\n", true},
	{"a = 1979-05-27T07:32:00Z\nb = 1979-05-27T00:32:00.999999-07:00\nc = 1979-05-27T07:32:00\nd = 1979-05-27\ne = 07:32:00\nf = 00:32:00.5\ng = 1979-05-27 07:32:00+01:30\n", true},
	{"a = 2021-02-30\n", false},
	{"a = 1979-05-27T25:00:00Z\n", false},
	// Syntax.
	{"", true},
	{"# only a comment\n\n", true},
	{"a = 1 b = 2\n", false},
	{"[a\n", false},
	{"a =\n", false},
	{"= 1\n", false},
	{"a = 1\r\nb = 2\r\n", true},
	{"a = 1\rb = 2\n", false},
}

func TestDecodeTOMLRules(t *testing.T) {
	for _, tc := range tomlRules {
		_, _, err := decodeTOML([]byte(tc.doc))
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok=%v", tc.doc, err, tc.ok)
		}
		var want map[string]any
		if werr := toml.Unmarshal([]byte(tc.doc), &want); (werr == nil) != tc.ok {
			t.Errorf("%q: go-toml says %v, want ok=%v (is the table right?)", tc.doc, werr, tc.ok)
		}
		compareDecoders(t, []byte(tc.doc))
	}
}

// The values keep go-toml's Go types and exact numbers.
func TestDecodeTOMLValues(t *testing.T) {
	doc := "i = 0xff\nf = -0.0\nn = nan\ns = \"a\\tb\"\nb = false\n[[t]]\nx.y = [1, 'a']\n"
	got, _, err := decodeTOML([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := got["f"].(float64)
	n, _ := got["n"].(float64)
	if got["i"] != int64(255) || math.Float64bits(f) != math.Float64bits(math.Copysign(0, -1)) ||
		!math.IsNaN(n) || got["s"] != "a\tb" || got["b"] != false {
		t.Errorf("scalars: %#v", got)
	}
	want := []any{map[string]any{"x": map[string]any{"y": []any{int64(1), "a"}}}}
	if !reflect.DeepEqual(got["t"], want) {
		t.Errorf("t = %#v, want %#v", got["t"], want)
	}
}

// A bad document fails on the line go-toml names, and the loader's message
// still names the key there.
func TestDecodeTOMLErrorLines(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"a = 1\n\nb = [1,\n  99999999999999999999]\n", "/t.toml:4: b: decimal number is too large"},
		{"[x]\ny = 1\n[z]\n[x]\n", `/t.toml:4: x: defined twice (first on line 1)`},
		{"[x]\ny = {a = 1, a = 2}\n", "/t.toml:2: x.y.a: defined twice (first on line 2)"},
		{"[a]\nb = 1\n[a.b.c]\n", "/t.toml:3: a.b: already defined on line 2; a.b.c cannot add to it here"},
		{"[[x]]\n[x.y]\n[[x]]\n[x.y]\n[x.y]\n", "/t.toml:5: x.y: defined twice (first on line 4)"},
		{"a = 1\n[a]\n", "/t.toml:2: a: defined twice (first on line 1)"},
		{"d = 2021-02-30\n", "/t.toml:1: d: impossible date"},
	} {
		_, err := ParseTOML("/t.toml", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %s...", tc.doc, err, tc.want)
		}
	}
}

// compareDecoders fails unless decodeTOML and toml.Unmarshal agree on data:
// both fail on the same line, or both give equal maps.
func compareDecoders(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]any
	werr := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = errGoTOMLPanicked
			}
		}()
		return toml.Unmarshal(data, &want)
	}()
	got, ix, gerr := decodeTOML(data)
	if errors.Is(werr, errGoTOMLPanicked) {
		t.Skipf("go-toml panics on %q; decodeTOML says %v", data, gerr)
	}
	switch {
	case werr != nil && gerr != nil:
		var de *toml.DecodeError
		var ge *decodeError
		if errors.As(werr, &de) && errors.As(gerr, &ge) {
			if line, _ := de.Position(); line != ge.Line {
				t.Fatalf("%q: go-toml fails on line %d (%v), decodeTOML on line %d (%v)", data, line, werr, ge.Line, gerr)
			}
		}
	case werr != nil:
		t.Fatalf("%q: go-toml fails (%v), decodeTOML gives %#v", data, werr, got)
	case gerr != nil:
		t.Fatalf("%q: decodeTOML fails (%v), go-toml gives %#v", data, gerr, want)
	case !sameValue(got, want):
		t.Fatalf("%q:\ndecodeTOML %#v\ngo-toml    %#v", data, got, want)
	default:
		checkIndex(t, data, nil, got, ix)
	}
}

// checkIndex asserts that the index knows every key of each table reachable
// through tables from table (at path), in file order, with a line.
func checkIndex(t *testing.T, data []byte, path []string, table map[string]any, ix *index) {
	t.Helper()
	keys := ix.keys(path)
	if len(keys) != len(table) {
		t.Fatalf("%q: %v has keys %v, the index %v", data, path, slices.Collect(maps.Keys(table)), keys)
	}
	lines := strings.Count(string(data), "\n") + 1
	for i, k := range keys {
		if _, ok := table[k.name]; !ok || k.line < 1 || k.line > lines || i > 0 && k.line < keys[i-1].line {
			t.Fatalf("%q: %v: index has %v", data, path, keys)
		}
		if sub, ok := table[k.name].(map[string]any); ok {
			checkIndex(t, data, append(slices.Clip(path), k.name), sub, ix)
		}
	}
}

var errGoTOMLPanicked = errors.New("go-toml panicked")

// sameValue is reflect.DeepEqual with floats compared by their bits (-0
// is not 0) and every NaN equal.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case float64:
		b, ok := b.(float64)
		return ok && (math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b))
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameValue(av, bv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// FuzzDecodeTOML checks decodeTOML against toml.Unmarshal on any input.
func FuzzDecodeTOML(f *testing.F) {
	f.Add([]byte(fullExample))
	if data, err := os.ReadFile("../../examples/tend.toml"); err == nil {
		f.Add(data)
	}
	for _, tc := range badInputs {
		f.Add([]byte(tc.doc))
	}
	for _, tc := range tomlRules {
		f.Add([]byte(tc.doc))
	}
	for _, data := range corpus(f, "FuzzParseTOML") {
		f.Add(data)
	}
	f.Add(fleet(20))
	f.Fuzz(func(t *testing.T, data []byte) {
		compareDecoders(t, data)
	})
}

// corpus reads the []byte inputs of another fuzz target's seed corpus.
func corpus(tb testing.TB, target string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no seed corpus for %s: %v", target, err)
	}
	var out [][]byte
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(text), "\n")[1:] {
			if quoted, ok := strings.CutPrefix(line, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
				if err != nil {
					tb.Fatalf("%s: %v", file, err)
				}
				out = append(out, []byte(s))
			}
		}
	}
	return out
}

// shapes writes a TOML document driven by choices: headers, arrays of
// tables, dotted keys and inline tables over a handful of key names, so that
// the rules on redefinition are met far more often than in random bytes.
func shapes(choices []byte) []byte {
	next := func(n int) int {
		if len(choices) == 0 {
			return 0
		}
		c := int(choices[0])
		choices = choices[1:]
		return c % n
	}
	names := []string{"a", "b", "c", `"a"`, "'b'", `"a.b"`, "program", "x"}
	key := func() string {
		parts := make([]string, 1+next(3))
		for i := range parts {
			parts[i] = names[next(len(names))]
		}
		return strings.Join(parts, []string{".", " . "}[next(2)])
	}
	var value func(depth int) string
	value = func(depth int) string {
		scalars := []string{"1", "0x1F", "0o7", "1_000", "1.5", "-0.0", "inf", "nan", "'s'", `"t\u00e9"`, "true", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", "9223372036854775808"}
		switch c := next(len(scalars) + 3); {
		case c < len(scalars) || depth > 3:
			return scalars[c%len(scalars)]
		case c == len(scalars):
			elems := make([]string, next(4))
			for i := range elems {
				elems[i] = value(depth + 1)
			}
			return "[" + strings.Join(elems, ", ") + "]"
		default:
			kvs := make([]string, next(4))
			for i := range kvs {
				kvs[i] = key() + " = " + value(depth+1)
			}
			return "{" + strings.Join(kvs, ", ") + "}"
		}
	}
	var b strings.Builder
	for len(choices) > 0 {
		switch next(5) {
		case 0:
			b.WriteString("[" + key() + "]\n")
		case 1:
			b.WriteString("[[" + key() + "]]\n")
		default:
			b.WriteString(key() + " = " + value(0) + "\n")
		}
	}
	return []byte(b.String())
}

// Random shapes, the same each run: decodeTOML agrees with go-toml on all.
func TestDecodeTOMLShapes(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(1, 2))
	choices := make([]byte, 40)
	for range n {
		for i := range choices {
			choices[i] = byte(r.Uint32())
		}
		compareDecoders(t, shapes(choices[:r.IntN(len(choices))]))
	}
}

// FuzzDecodeTOMLShapes is FuzzDecodeTOML over documents made by shapes.
func FuzzDecodeTOMLShapes(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 2})
	f.Fuzz(func(t *testing.T, choices []byte) {
		compareDecoders(t, shapes(choices))
	})
}
