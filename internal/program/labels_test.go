package program

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseLabel(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Label
		problem string // part of the error; "" = none
	}{
		{"session=s-42", Label{"session", "s-42"}, ""},
		{"owner=", Label{"owner", ""}, ""},                                          // an empty value is a value
		{"expr=a=b", Label{"expr", "a=b"}, ""},                                      // the first '=' splits
		{"k=" + strings.Repeat("é", 256), Label{"k", strings.Repeat("é", 256)}, ""}, // characters, not bytes
		{"session", Label{}, "want KEY=VALUE"},
		{"", Label{}, "want KEY=VALUE"},
		{"=v", Label{}, "label key"},
		{"Session=x", Label{}, "label key"},
		{"a b=x", Label{}, "label key"},
		{"-a=x", Label{}, "label key"},
		{"k=" + strings.Repeat("x", 257), Label{}, "257 characters"},
		{"k=a\nb", Label{}, "control character"},
		{"k=a\x00b", Label{}, "control character"},
		{"k=a\u009bb", Label{}, "control character U+009B"}, // C1: a CSI to a terminal (docs/trust.md)
		{"k=a\x7fb", Label{}, "control character U+007F"},
		{"k=\u00a0\u202e", Label{"k", "\u00a0\u202e"}, ""}, // printed escaped, not refused
		{"k=\xff", Label{}, "UTF-8"},
	} {
		got, err := ParseLabel(tc.in)
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("ParseLabel(%q): %v", tc.in, err)
		case tc.problem == "" && got != tc.want:
			t.Errorf("ParseLabel(%q) = %+v, want %+v", tc.in, got, tc.want)
		case tc.problem != "" && err == nil:
			t.Errorf("ParseLabel(%q) = %+v, want an error with %q", tc.in, got, tc.problem)
		case tc.problem != "" && (!strings.Contains(err.Error(), tc.problem) || !errors.Is(err, ErrBadLabel)):
			t.Errorf("ParseLabel(%q): %v, want ErrBadLabel with %q", tc.in, err, tc.problem)
		}
	}
}

func TestCheckLabels(t *testing.T) {
	if errs := CheckLabels(map[string]string{"session": "s-42", "owner": "ana", "empty": ""}); errs != nil {
		t.Errorf("good labels: %v", errs)
	}
	errs := CheckLabels(map[string]string{"Bad": "x", "long": strings.Repeat("x", 300), "ok": "y"})
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `"Bad"`) || !strings.Contains(errs[1].Error(), "label long") {
		t.Errorf("bad labels: %v, want one error naming Bad, then one naming long", errs)
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	if errs := CheckLabels(many); len(errs) != 1 || !strings.Contains(errs[0].Error(), "65 labels") {
		t.Errorf("65 labels: %v", errs)
	}
	delete(many, "k0")
	if errs := CheckLabels(many); errs != nil {
		t.Errorf("64 labels: %v", errs)
	}
}

func TestLabelSelectorMatches(t *testing.T) {
	labels := map[string]string{"session": "s-42", "owner": "ana", "empty": ""}
	for _, tc := range []struct {
		sel  []string
		want bool
	}{
		{nil, true},
		{[]string{"session=s-42"}, true},
		{[]string{"session=s-42", "owner=ana"}, true},
		{[]string{"session=s-42", "owner=bob"}, false}, // all must match
		{[]string{"session=s-4"}, false},
		{[]string{"empty="}, true},
		{[]string{"missing="}, false}, // a key the program lacks is not an empty value
		{[]string{"session=s-42", "session=s-43"}, false},
	} {
		sel, err := ParseLabelSelector(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.Matches(labels); got != tc.want {
			t.Errorf("%v matches %v = %v, want %v", tc.sel, labels, got, tc.want)
		}
	}
	if got := (LabelSelector{}).Matches(nil); !got {
		t.Error("the empty selector must match a program without labels")
	}
	if _, err := ParseLabelSelector([]string{"a=1", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a bad requirement: %v, want an error naming it", err)
	}
}

func TestFormatLabels(t *testing.T) {
	if got := FormatLabels(map[string]string{"session": "s-42", "owner": "ana"}); got != "owner=ana,session=s-42" {
		t.Errorf("FormatLabels = %q", got)
	}
	if got := FormatLabels(nil); got != "" {
		t.Errorf("FormatLabels(nil) = %q", got)
	}
}

// A label that parses prints back as it was given, and its parts pass the
// checks a program's labels pass.
func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"session=s-42", "a=", "a=b=c", "=x", "K=v", "k=\x00", "k=é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLabel(s)
		if err != nil {
			return
		}
		if l.String() != s {
			t.Errorf("ParseLabel(%q).String() = %q", s, l.String())
		}
		if errs := CheckLabels(map[string]string{l.Key: l.Value}); errs != nil {
			t.Errorf("ParseLabel(%q) accepted what CheckLabels refuses: %v", s, errs)
		}
	})
}

func TestExitStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	sig := func(s string) *string { return &s }
	for _, tc := range []struct {
		code   *int
		signal *string
		errno  string
		want   int
	}{
		{code(0), nil, "", 0},
		{code(3), nil, "", 3},
		{nil, sig("SIGTERM"), "", 143},
		{nil, sig("SIGKILL"), "", 137},
		{nil, nil, "ENOENT", 127},
		{nil, nil, "", 127},
		{nil, nil, "EACCES", 126},
	} {
		if got := ExitStatus(tc.code, tc.signal, tc.errno); got != tc.want {
			t.Errorf("ExitStatus(%v, %v, %q) = %d, want %d", tc.code, tc.signal, tc.errno, got, tc.want)
		}
	}
}
