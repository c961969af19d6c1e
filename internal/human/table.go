package human

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/program"
)

// Header are the ps table's columns; WHY is last so it can be cut to fit.
var Header = []string{"ID", "STATE", "LIFECYCLE", "PID", "UPTIME", "RSS", "CRASHES", "RESTARTS", "WHY"}

// Layout of the ps table.
const (
	padding = 2  // spaces between columns
	MinWhy  = 12 // WHY keeps this many runes even when the other columns overflow
)

// TableOptions choose the ps table's optional columns.
type TableOptions struct {
	Labels bool // a LABELS column (KEY=VALUE,...) before WHY: tend ps --show-labels
}

// Table writes the aligned ps table of list, cutting WHY so that no line is
// wider than width. When its RSS figures are a second old or more, the
// header says so: "RSS (3s ago)". When the other columns alone are wider than that, WHY
// keeps MinWhy runes: a line that overflows beats a reason that is gone.
func Table(w io.Writer, list []program.Status, width int) error {
	return TableWith(w, list, width, TableOptions{})
}

// TableWith is Table with the optional columns o asks for.
func TableWith(w io.Writer, list []program.Status, width int, o TableOptions) error {
	header := Header
	if o.Labels {
		header = slices.Insert(slices.Clone(Header), len(Header)-1, "LABELS")
	}
	if age := SampleAge(list); age >= time.Second {
		header = slices.Clone(header)
		header[slices.Index(header, "RSS")] = "RSS (" + strconv.Itoa(int(age/time.Second)) + "s ago)"
	}
	cols := len(header)
	cells := make([]string, 0, (len(list)+1)*cols)
	cells = append(cells, header...)
	for i := range list {
		st := &list[i]
		cells = append(cells, st.ID, st.State, st.Lifecycle, PID(st.PID), Uptime(st),
			RSS(st.RSSBytes), strconv.Itoa(st.CrashCount), Restarts(st.Restarts))
		if o.Labels {
			cells = append(cells, orDash(program.FormatLabels(st.Labels)))
		}
		cells = append(cells, st.Why)
	}
	// Every column but WHY is as wide as its widest cell plus the padding;
	// WHY starts where they end.
	widths := make([]int, cols-1)
	for r := 0; r < len(cells); r += cols {
		for c := range widths {
			widths[c] = max(widths[c], utf8.RuneCountInString(cells[r+c]))
		}
	}
	whyAt := 0
	for _, n := range widths {
		whyAt += n + padding
	}
	whyWidth := max(width-whyAt, MinWhy)

	// Written through a small buffer: a table of ten thousand lines is
	// never held whole.
	b := bufio.NewWriterSize(w, 32<<10)
	for r := 0; r < len(cells); r += cols {
		for c, n := range widths {
			cell := cells[r+c]
			b.WriteString(cell)
			b.WriteString(spaces(n + padding - utf8.RuneCountInString(cell)))
		}
		b.WriteString(Cut(cells[r+cols-1], whyWidth))
		b.WriteByte('\n')
	}
	return b.Flush()
}

// SampleAge is how old the oldest process sample of list was when the
// list was computed (a listing may answer from samples a few seconds old):
// the ps table's RSS header says it from a second up.
func SampleAge(list []program.Status) time.Duration {
	var age time.Duration
	for i := range list {
		if st := &list[i]; !st.SampledAt.IsZero() {
			age = max(age, st.ComputedAt.Sub(st.SampledAt.Time))
		}
	}
	return age
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// spaces returns n blanks.
func spaces(n int) string {
	const blanks = "                                                                "
	if n <= len(blanks) {
		return blanks[:n]
	}
	return strings.Repeat(" ", n)
}

// Cut shortens s to at most n runes, marking a cut with "…".
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
