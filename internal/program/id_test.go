package program

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Selector
		ok   bool
	}{
		{"all", Selector{All: true, Instance: -1}, true},
		{"web", Selector{Program: "web", Instance: -1}, true},
		{"web:0", Selector{Program: "web", Instance: 0}, true},
		{"web:12", Selector{Program: "web", Instance: 12}, true},
		{"a.b_c-d:3", Selector{Program: "a.b_c-d", Instance: 3}, true},
		{"all:0", Selector{Program: "all", Instance: 0}, true},
		{"", Selector{}, false},
		{"ALL", Selector{}, false},
		{"Web", Selector{}, false},
		{"web:", Selector{}, false},
		{"web:-1", Selector{}, false},
		{"web:+1", Selector{}, false},
		{"web:01", Selector{}, false},
		{"web: 1", Selector{}, false},
		{"web:1:2", Selector{}, false},
		{"web:99999999999999999999", Selector{}, false},
		{":0", Selector{}, false},
		{"..", Selector{}, false},
		{"../x", Selector{}, false},
		{"../../etc/passwd", Selector{}, false},
		{"x/../y", Selector{}, false},
		{"%2e%2e", Selector{}, false},
		{"web\x00", Selector{}, false},
		{"web\n", Selector{}, false},
		{"web:0\n", Selector{}, false},
		{"wéb", Selector{}, false},
		{"web\xff", Selector{}, false},
		{"-web", Selector{}, false},
		{".web", Selector{}, false},
		{strings.Repeat("a", 63), Selector{Program: strings.Repeat("a", 63), Instance: -1}, true},
		{strings.Repeat("a", 64), Selector{}, false},
	} {
		got, err := ParseSelector(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseSelector(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadID) {
			t.Errorf("ParseSelector(%q): error %v does not match ErrBadID", tc.in, err)
		}
	}
}

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		k    int
		ok   bool
	}{
		{"web:0", "web", 0, true},
		{"web:7", "web", 7, true},
		{"web", "", 0, false},
		{"all", "", 0, false},
		{"web:x", "", 0, false},
		{"../web:0", "", 0, false},
	} {
		name, k, ok := SplitID(tc.in)
		if name != tc.name || k != tc.k || ok != tc.ok {
			t.Errorf("SplitID(%q) = %q, %d, %v; want %q, %d, %v", tc.in, name, k, ok, tc.name, tc.k, tc.ok)
		}
	}
}

// FuzzParseSelector checks that whatever an id argument holds, ParseSelector
// either rejects it with ErrBadID or returns a selector that names exactly
// what was written: formatting it again gives the input back, so no other
// spelling (a path, an escape, a padded number) can reach a backend.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{
		"all", "web", "web:0", "web:12", "a.b_c-d:3", "web:-1", "web:01", "web:+1", "web:",
		"../x", "..%2fx", "%2e%2e", "x%00", "web\x00:0", "wéb:0", "web\xff", "web:٣",
		"web:9223372036854775807", "web:9223372036854775808", "web:1e3", "web:0x1", " web",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		name, k, isID := SplitID(s)
		if err != nil {
			if !errors.Is(err, ErrBadID) {
				t.Fatalf("ParseSelector(%q): error %v does not match ErrBadID", s, err)
			}
			if isID {
				t.Fatalf("SplitID(%q) accepts what ParseSelector rejects", s)
			}
			return
		}
		var again string
		switch {
		case sel.All:
			if sel.Program != "" || sel.Instance != -1 {
				t.Fatalf("ParseSelector(%q) = %+v: all with a program or instance", s, sel)
			}
			again = "all"
		case !NamePattern.MatchString(sel.Program):
			t.Fatalf("ParseSelector(%q) = %+v: program does not match %s", s, sel, NamePattern)
		case sel.Instance < -1:
			t.Fatalf("ParseSelector(%q) = %+v: instance below -1", s, sel)
		case sel.Instance == -1:
			again = sel.Program
		default:
			again = InstanceID(sel.Program, sel.Instance)
		}
		if again != s {
			t.Fatalf("ParseSelector(%q) = %+v, which formats as %q", s, sel, again)
		}
		if strings.ContainsAny(s, "/\\\x00") || sel.Program == "." || sel.Program == ".." {
			t.Fatalf("ParseSelector(%q) accepted a path", s)
		}
		wantID := !sel.All && sel.Instance >= 0
		if isID != wantID || isID && (name != sel.Program || k != sel.Instance) {
			t.Fatalf("SplitID(%q) = %q, %d, %v disagrees with %+v", s, name, k, isID, sel)
		}
	})
}
