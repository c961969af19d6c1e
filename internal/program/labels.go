package program

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Labels are a program's KEY = "VALUE" pairs (config key labels): a
// platform marks which session, user or task an agent belongs to, and
// selects by them with -l KEY=VALUE and ?label=KEY=VALUE. Every instance
// of a program carries its program's labels.
//
// Keys are written as program names are (NamePattern); values are at
// most MaxLabelValue characters without control characters (they are
// printed in tables and typed in selectors); a program has at most
// MaxLabels of them.
const (
	MaxLabels     = 64
	MaxLabelValue = 256 // characters (runes), not bytes
)

// ErrBadLabel is wrapped by every label and selector problem.
var ErrBadLabel = errors.New("bad label")

// LabelKeyProblem says what is wrong with key as a label key; "" when
// nothing is.
func LabelKeyProblem(key string) string {
	if !NamePattern.MatchString(key) {
		return fmt.Sprintf("label key %q: a key is written as a program name, %s", key, NamePattern)
	}
	return ""
}

// LabelValueProblem says what is wrong with v as a label value; "" when
// nothing is.
func LabelValueProblem(v string) string {
	if !utf8.ValidString(v) {
		return "not valid UTF-8"
	}
	if n := utf8.RuneCountInString(v); n > MaxLabelValue {
		return fmt.Sprintf("%d characters, the most a label value may have is %d", n, MaxLabelValue)
	}
	for _, r := range v {
		if r < 0x20 || r >= 0x7f && r <= 0x9f { // C0, DEL and C1
			return fmt.Sprintf("contains the control character %U (values are printed in tables and typed in selectors)", r)
		}
	}
	return ""
}

// CheckLabels returns the problems of a program's labels, one error per
// label that has one (in key order), each naming the label; nil when
// there is none. Each wraps ErrBadLabel.
func CheckLabels(labels map[string]string) []error {
	var errs []error
	if len(labels) > MaxLabels {
		errs = append(errs, fmt.Errorf("%w: %d labels, the most a program may have is %d", ErrBadLabel, len(labels), MaxLabels))
	}
	for _, k := range SortedKeys(labels) {
		if p := LabelKeyProblem(k); p != "" {
			errs = append(errs, fmt.Errorf("%w: %s", ErrBadLabel, p))
		} else if p := LabelValueProblem(labels[k]); p != "" {
			errs = append(errs, fmt.Errorf("%w: label %s: %s", ErrBadLabel, k, p))
		}
	}
	return errs
}

// SortedKeys returns the keys of labels in order.
func SortedKeys(labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FormatLabels writes labels as KEY=VALUE pairs in key order, joined by
// commas: "owner=ana,session=s-42". No labels is "".
func FormatLabels(labels map[string]string) string {
	var b strings.Builder
	for i, k := range SortedKeys(labels) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

// Label is one KEY=VALUE requirement of a LabelSelector.
type Label struct {
	Key, Value string
}

// String is the requirement as it is typed: KEY=VALUE.
func (l Label) String() string { return l.Key + "=" + l.Value }

// ParseLabel reads one "KEY=VALUE" (the value may hold '=' and may be
// empty). The error names what was given and wraps ErrBadLabel.
func ParseLabel(s string) (Label, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return Label{}, fmt.Errorf("%w: %q: want KEY=VALUE", ErrBadLabel, s)
	}
	if p := LabelKeyProblem(k); p != "" {
		return Label{}, fmt.Errorf("%w: %q: %s", ErrBadLabel, s, p)
	}
	if p := LabelValueProblem(v); p != "" {
		return Label{}, fmt.Errorf("%w: %q: value: %s", ErrBadLabel, s, p)
	}
	return Label{Key: k, Value: v}, nil
}

// LabelSelector selects the instances whose program has every one of its
// labels (an empty selector selects everything), as -l KEY=VALUE ... and
// ?label=KEY=VALUE&label=... say.
type LabelSelector []Label

// ParseLabelSelector reads each "KEY=VALUE" of list; the error names the
// first that is not one.
func ParseLabelSelector(list []string) (LabelSelector, error) {
	if len(list) > MaxLabels {
		return nil, fmt.Errorf("%w: %d label requirements, the most is %d", ErrBadLabel, len(list), MaxLabels)
	}
	var sel LabelSelector
	for _, s := range list {
		l, err := ParseLabel(s)
		if err != nil {
			return nil, err
		}
		sel = append(sel, l)
	}
	return sel, nil
}

// Matches reports whether labels has every requirement of s.
func (s LabelSelector) Matches(labels map[string]string) bool {
	for _, l := range s {
		if v, ok := labels[l.Key]; !ok || v != l.Value {
			return false
		}
	}
	return true
}

// Strings is s as "KEY=VALUE" strings, for query parameters.
func (s LabelSelector) Strings() []string {
	out := make([]string, len(s))
	for i, l := range s {
		out[i] = l.String()
	}
	return out
}

// String is s as it is typed after -l, joined by commas.
func (s LabelSelector) String() string { return strings.Join(s.Strings(), ",") }
