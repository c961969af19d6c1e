package human

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
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
// wider than width. When the other columns alone are wider than that, WHY
// keeps MinWhy runes: a line that overflows beats a reason that is gone.
// Its header is the same whatever the age of the RSS figures (a listing's
// may be a few seconds old; --json says when each was read in
// sampled_at): scripts split it on blanks.
func Table(w io.Writer, list []program.Status, width int) error {
	return TableWith(w, list, width, TableOptions{})
}

// TableWith is Table with the optional columns o asks for.
func TableWith(w io.Writer, list []program.Status, width int, o TableOptions) error {
	t := NewTable(o, len(list))
	for i := range list {
		t.Add(&list[i])
	}
	return t.Write(w, width)
}

// A PsTable is the ps table built a row at a time (Add), then written
// whole: a listing adds its statuses as it derives them, and keeps their
// cells, not the statuses.
type PsTable struct {
	o     TableOptions
	cols  int
	cells []string // the rows' cells, cols a row, after the header's row
}

// NewTable returns an empty table with the columns o asks for, with room
// for rows rows.
func NewTable(o TableOptions, rows int) *PsTable {
	t := &PsTable{o: o, cols: len(Header)}
	if o.Labels {
		t.cols++
	}
	t.cells = make([]string, t.cols, (rows+1)*t.cols) // the header's, filled by Write
	return t
}

// Add appends st's row. Every cell is escaped (Escape): a why, a label
// or a name is the program's text, and a cell holds no control, not even
// a newline or a tab, that could steer the terminal or break the table.
func (t *PsTable) Add(st *program.Status) {
	life := st.Lifecycle
	if st.Waiting != nil {
		life = "waiting" // a protocol agent's permission request waits for the operator (docs/protocol.md)
	}
	t.cells = append(t.cells, Escape(st.ID), Escape(st.State), Escape(life), PID(st.PID), Uptime(st),
		RSS(st.RSSBytes), strconv.Itoa(st.CrashCount), Restarts(st.Restarts))
	if t.o.Labels {
		t.cells = append(t.cells, Escape(orDash(program.FormatLabels(st.Labels))))
	}
	t.cells = append(t.cells, Escape(st.Why))
}

// Write writes the table, no line wider than width but for MinWhy.
func (t *PsTable) Write(w io.Writer, width int) error {
	header := Header
	if t.o.Labels {
		header = slices.Insert(slices.Clone(Header), len(Header)-1, "LABELS")
	}
	copy(t.cells, header)
	cols, cells := t.cols, t.cells
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
	b := bufio.NewWriterSize(w, 16<<10)
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
