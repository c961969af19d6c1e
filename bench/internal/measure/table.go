package measure

import (
	"fmt"
	"io"
)

// Table writes a report's rows, one measure each, over the runs of R: the
// value of each run that has it (Span), the target, the verdict of the
// runs (Verdict) and the peers' figures. W is usually a tabwriter. With
// Two, every row has a second value column: the same measure in tend's
// other mode (cgroups off), beside the default mode that the verdict judges.
type Table[R any] struct {
	W    io.Writer
	Runs []R
	Two  bool
}

// Row prints one measure: get's value in each run that has it, formatted
// by f; pass, if not nil, judges each value against target.
func (t Table[R]) Row(name string, get func(R) (float64, bool), f func(float64) string, target string, pass func(float64) bool, peers string) {
	t.Row2(name, get, nil, f, target, pass, peers)
}

// Row2 is Row with other's value in the second column (nothing there when
// other is nil); the verdict judges get's values only.
func (t Table[R]) Row2(name string, get, other func(R) (float64, bool), f func(float64) string, target string, pass func(float64) bool, peers string) {
	var vals, others []float64
	var ok []bool
	for _, r := range t.Runs {
		if v, has := get(r); has {
			vals = append(vals, v)
			if pass != nil {
				ok = append(ok, pass(v))
			}
		}
		if other != nil {
			if v, has := other(r); has {
				others = append(others, v)
			}
		}
	}
	second := ""
	if t.Two {
		second = "\t"
		if other != nil {
			second = "\t" + Span(others, f)
		}
	}
	fmt.Fprintf(t.W, "%s\t%s%s\t%s\t%s\t%s\n", name, Span(vals, f), second, target, Verdict(ok), peers)
}

// Line prints a row with text in the value's column and nothing else.
func (t Table[R]) Line(name, text string) {
	if t.Two {
		fmt.Fprintf(t.W, "%s\t%s\t\t\t\t\n", name, text)
		return
	}
	fmt.Fprintf(t.W, "%s\t%s\t\t\t\n", name, text)
}
