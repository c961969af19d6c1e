package program

import (
	"regexp"
	"strings"
	"testing"
)

// NamePattern matches by hand what its regexp matches.
func TestNamePatternIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(NamePattern.String())
	for _, s := range []string{
		"", "a", "0", "web", "web-1", "a.b_c-d", "-a", ".a", "_a", "A", "aB", "a b", "a:0", "é", "a\n",
		"all", strings.Repeat("a", 62), strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62),
	} {
		if got, want := NamePattern.MatchString(s), re.MatchString(s); got != want {
			t.Errorf("NamePattern.MatchString(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

func FuzzNamePattern(f *testing.F) {
	for _, s := range []string{"web", "-a", "a\x00", strings.Repeat("z", 63), "a.b"} {
		f.Add(s)
	}
	re := regexp.MustCompile(NamePattern.String())
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := NamePattern.MatchString(s), re.MatchString(s); got != want {
			t.Errorf("NamePattern.MatchString(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
