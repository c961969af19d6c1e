package config

import (
	"cmp"
	"slices"
	"strings"

	find "github.com/tend-sh/tend/internal/locate"
	"github.com/tend-sh/tend/internal/program"
)

// Error is one problem in a configuration, printed as
// "file:line: key: what is wrong". Parts that are unknown are left out: a
// JSON body has no file or line, a read error no key.
type Error struct {
	File string // the file as the caller named it; "" for an API body
	Line int    // 1-based; 0 when unknown
	Key  string // dotted path of the key, e.g. "program.worker.stop_grace"
	Msg  string // what is wrong
	Err  error  // the underlying cause, if any (e.g. a read error); may be nil

	// invalid marks a problem in an API request body: it wraps
	// program.ErrInvalid rather than program.ErrBadConfig.
	invalid bool
}

// Error formats the problem as "file:line: key: msg" (locate.Message).
func (e *Error) Error() string { return find.Message(e.File, e.Line, e.Key, e.Msg) }

// Unwrap makes every config problem match program.ErrBadConfig (an API body
// problem program.ErrInvalid) with errors.Is, plus its cause if any.
func (e *Error) Unwrap() []error {
	sentinel := program.ErrBadConfig
	if e.invalid {
		sentinel = program.ErrInvalid
	}
	if e.Err != nil {
		return []error{sentinel, e.Err}
	}
	return []error{sentinel}
}

// Errors is every problem found in one configuration, in file order.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each problem, so errors.Is and errors.As see through the list.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// collector gathers problems while a configuration is decoded, so that one
// run reports them all. A problem in [defaults] is met once per program that
// inherits it; the collector keeps it once.
type collector struct {
	file    string
	index   *index // nil when there are no lines (API bodies)
	invalid bool   // API body: problems wrap program.ErrInvalid
	errs    Errors
	seen    map[string]bool
}

// add records a problem at the key path, looking its line up in the index.
func (c *collector) add(path []string, msg string) {
	e := &Error{File: c.file, Key: strings.Join(path, "."), Msg: msg, invalid: c.invalid}
	if c.index != nil {
		e.Line = c.index.line(path)
	}
	c.addError(e)
}

func (c *collector) addError(e *Error) {
	s := e.Error()
	if c.seen[s] {
		return
	}
	if c.seen == nil {
		c.seen = make(map[string]bool)
	}
	c.seen[s] = true
	c.errs = append(c.errs, e)
}

// err returns the problems in line order, or nil when there are none (never a
// typed nil inside an error interface).
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(c.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return c.errs
}
