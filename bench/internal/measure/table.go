package measure

import (
	"fmt"
	"io"
)

// Table writes a report's rows, one measure each, over the runs of R: the
// value of each run that has it (Span), the target, the verdict of the
// runs (Verdict) and the peers' figures. W is usually a tabwriter.
type Table[R any] struct {
	W    io.Writer
	Runs []R
}

// Row prints one measure: get's value in each run that has it, formatted
// by f; pass, if not nil, judges each value against target.
func (t Table[R]) Row(name string, get func(R) (float64, bool), f func(float64) string, target string, pass func(float64) bool, peers string) {
	var vals []float64
	var ok []bool
	for _, r := range t.Runs {
		v, has := get(r)
		if !has {
			continue
		}
		vals = append(vals, v)
		if pass != nil {
			ok = append(ok, pass(v))
		}
	}
	fmt.Fprintf(t.W, "%s\t%s\t%s\t%s\t%s\n", name, Span(vals, f), target, Verdict(ok), peers)
}

// Line prints a row with text in the value's column and nothing else.
func (t Table[R]) Line(name, text string) {
	fmt.Fprintf(t.W, "%s\t%s\t\t\t\n", name, text)
}
