package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// decodeTOML decodes a document into the map[string]any that
// toml.Unmarshal builds (same value types: string, int64, float64, bool,
// []any, map[string]any, time.Time and go-toml's local date/time types), and
// enforces the same TOML rules, in time linear in the document: go-toml
// checks each new key against a list of every key seen, which is quadratic
// in the number of tables (10,000 programs took most of a second); here
// each table keeps its own keys (see kids). The index of the lines of keys
// comes out of the same pass. A document that is not TOML is a
// *decodeError.
func decodeTOML(data []byte) (map[string]any, *index, error) {
	d := &decoder{data: data, line: 1}
	d.root = &tnode{kind: kTable, explicit: true, table: map[string]any{}}
	d.cur = d.root
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		it := e.Key()
		it.Next()
		line := d.lineAt(int(it.Node().Raw.Offset))
		var err *decodeError
		switch e.Kind {
		case unstable.Table:
			err = d.table(e, line, false)
		case unstable.ArrayTable:
			err = d.table(e, line, true)
		case unstable.KeyValue:
			err = d.keyValue(e, line)
		}
		if err != nil {
			if err.Line == 0 {
				err.Line = line
			}
			return nil, nil, err
		}
	}
	if err := p.Error(); err != nil {
		de := &decodeError{Msg: err.Error(), Line: 1, table: d.curPath}
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			de.Msg, de.Line = pe.Message, d.lineOf(pe.Highlight)
		}
		return nil, nil, de
	}
	return d.root.table, &d.index, nil
}

// decodeError is a document that is not TOML: a syntax error, a key defined
// twice, a value out of range. Its words are go-toml's; tomlError makes
// them tend's.
type decodeError struct {
	Line  int      // 1-based line of the problem
	Key   []string // the key it concerns; nil for a syntax error
	First int      // a key defined twice: the line it was first defined on; else 0
	Full  []string // with First: the whole key of the expression redefining Key
	Msg   string

	table []string // a syntax error: the table open before it
}

func (e *decodeError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

type decoder struct {
	index
	data    []byte
	cur     *tnode   // the table key/value expressions go to
	curPath []string // its path

	// The line at offset off, kept so that lines are counted once: the
	// offsets asked about mostly only grow.
	off, line int
}

// lineAt is the 1-based line of the byte at offset off.
func (d *decoder) lineAt(off int) int {
	if off < d.off {
		d.off, d.line = 0, 1
	}
	off = min(off, len(d.data))
	d.line += bytes.Count(d.data[d.off:off], []byte{'\n'})
	d.off = off
	return d.line
}

// lineOf is the line of b, a slice of the document.
func (d *decoder) lineOf(b []byte) int {
	off := cap(d.data) - cap(b)
	if b == nil || off < 0 || off > len(d.data) {
		off = len(d.data)
	}
	return d.lineAt(off)
}

// redefined is the error for key parts[:n] (under base), which the
// expression with the whole key base+parts may not define or extend.
func redefined(base, parts []string, n int, first int, format string, args ...any) *decodeError {
	full := append(slices.Clip(base), parts...)
	return &decodeError{Key: full[:len(base)+n], Full: full, First: first, Msg: fmt.Sprintf(format, args...)}
}

func keyParts(e *unstable.Node) []string {
	var parts []string
	it := e.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// table handles a [header] or [[header]] on line: every part but the last
// may be any table; the last is defined here.
func (d *decoder) table(e *unstable.Node, line int, array bool) *decodeError {
	parts := keyParts(e)
	d.curPath = parts
	parent := d.root
	for i, name := range parts[:len(parts)-1] {
		k := parent.kids.get(name)
		switch {
		case k.n == nil:
			k.n = d.newTable(parent, name, kTable, line)
		case k.n.kind == kValue:
			return redefined(nil, parts, i+1, k.line, "key %s already exists as a value", name)
		}
		parent = k.n
	}
	last := len(parts)
	name := parts[last-1]
	k := parent.kids.get(name)
	n := k.n
	if array {
		switch {
		case n == nil:
			n = &tnode{kind: kArrayTable, holder: parent.table, name: name}
			parent.kids.add(name, n, line)
		case n.kind != kArrayTable:
			return redefined(nil, parts, last, k.line, "key %s already exists as a %s, but should be an array table", name, kindNames[n.kind])
		}
		// A new element: the node stands for it from now on, and the keys
		// of the previous one are forgotten.
		n.table = map[string]any{}
		n.kids = kids{}
		arr, _ := n.holder[name].([]any)
		n.holder[name] = append(arr, n.table)
		d.cur = n
		return nil
	}
	switch {
	case n == nil:
		n = d.newTable(parent, name, kTable, line)
	case n.kind == kTable && !n.explicit:
	case n.kind == kTable:
		return redefined(nil, parts, last, k.line, "table %s already exists", name)
	case n.kind == kDotted:
		return redefined(nil, parts, last, k.line, "table %s already exists as defined by a dotted key", name)
	case n.kind == kArrayTable:
		return redefined(nil, parts, last, k.line, "table %s already exists as an array of tables", name)
	default:
		return redefined(nil, parts, last, k.line, "key %s should be a table, not a %s", name, kindNames[n.kind])
	}
	n.explicit = true
	d.cur = n
	return nil
}

func (d *decoder) newTable(parent *tnode, name string, kind tkind, line int) *tnode {
	n := &tnode{kind: kind, table: map[string]any{}}
	parent.table[name] = n.table
	parent.kids.add(name, n, line)
	return n
}

// keyValue handles key = value on line, in the current table. As in
// go-toml, a key defined twice is found before a problem inside the value,
// and a key defined twice inside an inline table before a bad scalar
// anywhere in it.
func (d *decoder) keyValue(e *unstable.Node, line int) *decodeError {
	var st valueState
	if err := d.set(d.cur, d.curPath, e, line, &st); err != nil {
		return err
	}
	if st.dup != nil {
		return st.dup
	}
	return st.bad
}

// valueState is the first problem of each kind met inside a value.
type valueState struct {
	dup *decodeError // a key defined twice in an inline table
	bad *decodeError // a scalar that does not convert
}

// set defines the (maybe dotted) key of kv, on line, under parent (at path
// base). It returns the key's own error; the value's go to st.
func (d *decoder) set(parent *tnode, base []string, kv *unstable.Node, line int, st *valueState) *decodeError {
	it := kv.Key()
	for n := 1; it.Next(); n++ {
		name := string(it.Node().Data)
		k := parent.kids.get(name)
		if it.IsLast() {
			if k.n != nil {
				return redefined(base, keyParts(kv), n, k.line, "key %s is already defined", name)
			}
			v := kv.Value()
			if v.Kind != unstable.InlineTable {
				parent.kids.add(name, scalarNode, line)
				parent.table[name] = d.value(v, base, kv, st)
				return nil
			}
			// Its own node, so that the index finds the keys inside.
			t := &tnode{kind: kValue, table: map[string]any{}}
			parent.kids.add(name, t, line)
			parent.table[name] = t.table
			d.inlineTable(t, v, append(slices.Clip(base), keyParts(kv)...), st)
			return nil
		}
		switch {
		case k.n == nil:
			k.n = d.newTable(parent, name, kDotted, line)
		case k.n.kind != kDotted:
			return redefined(base, keyParts(kv), n, k.line, "key %s is already defined", name)
		}
		parent = k.n
	}
	return nil
}

// inlineTable fills t, at path, from the key/values of n. Its keys follow
// the rules of dotted keys; being a value, it is never extended afterwards.
func (d *decoder) inlineTable(t *tnode, n *unstable.Node, path []string, st *valueState) {
	it := n.Children()
	for it.Next() {
		kv := it.Node()
		key := kv.Key()
		key.Next()
		if err := d.set(t, path, kv, d.lineAt(int(key.Node().Raw.Offset)), st); err != nil && st.dup == nil {
			st.dup = err
		}
	}
}

// value converts the value of kv (whose table is at path base). The first
// problem of each kind goes to st; the value is then useless, but the walk
// goes on so that a key defined twice later in the value still wins over a
// bad scalar before it.
func (d *decoder) value(n *unstable.Node, base []string, kv *unstable.Node, st *valueState) any {
	var v any
	var msg string
	switch n.Kind {
	case unstable.String:
		return string(n.Data)
	case unstable.Bool:
		return n.Data[0] == 't'
	case unstable.Integer:
		v, msg = parseInteger(n.Data)
	case unstable.Float:
		v, msg = parseFloat(n.Data)
	case unstable.DateTime, unstable.LocalDateTime, unstable.LocalDate, unstable.LocalTime:
		v, msg = parseDateTime(n.Data)
	case unstable.Array:
		arr := []any{}
		it := n.Children()
		for it.Next() {
			arr = append(arr, d.value(it.Node(), base, kv, st))
		}
		return arr
	case unstable.InlineTable:
		// In an array: nothing names the keys inside, so the index need
		// not reach it.
		t := &tnode{kind: kValue, table: map[string]any{}}
		d.inlineTable(t, n, append(slices.Clip(base), keyParts(kv)...), st)
		return t.table
	default:
		msg = fmt.Sprintf("unsupported value kind %s", n.Kind)
	}
	if msg != "" && st.bad == nil {
		st.bad = &decodeError{Line: d.lineAt(int(n.Raw.Offset)), Key: append(slices.Clip(base), keyParts(kv)...), Msg: msg}
	}
	return v
}

// parseInteger converts an integer the parser accepted (decimal with an
// optional sign, or 0x, 0o, 0b; underscores between digits).
func parseInteger(b []byte) (any, string) {
	s := withoutUnderscores(b)
	base, what := 10, "decimal"
	if len(s) > 2 && s[0] == '0' {
		switch s[1] {
		case 'x':
			base, what = 16, "hexadecimal"
		case 'o':
			base, what = 8, "octal"
		case 'b':
			base, what = 2, "binary"
		}
		if base != 10 {
			s = s[2:]
		}
	}
	n, err := strconv.ParseInt(s, base, 64)
	if err != nil {
		return nil, what + " number is too large to fit in a 64-bit signed integer"
	}
	return n, ""
}

// parseFloat converts a float the parser accepted, inf and nan included.
func parseFloat(b []byte) (any, string) {
	i := 0
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		i = 1
	}
	if len(b) == i+3 {
		switch b[i] {
		case 'i':
			if b[0] == '-' {
				return math.Inf(-1), ""
			}
			return math.Inf(1), ""
		case 'n':
			return math.NaN(), ""
		}
	}
	f, err := strconv.ParseFloat(withoutUnderscores(b), 64)
	if err != nil {
		return nil, "unable to parse float: " + err.Error()
	}
	return f, ""
}

func withoutUnderscores(b []byte) string {
	if bytes.IndexByte(b, '_') < 0 {
		return string(b)
	}
	return strings.ReplaceAll(string(b), "_", "")
}

// parseDateTime converts a date, time or date-time by asking go-toml, so
// the value is exactly the one toml.Unmarshal gives (time.Time with its
// zone, or toml.LocalDate, LocalTime, LocalDateTime). No tend key takes
// one, so the cost of a tiny second decode does not matter.
func parseDateTime(b []byte) (any, string) {
	var doc map[string]any
	if err := toml.Unmarshal(append([]byte("v="), b...), &doc); err != nil {
		return nil, strings.TrimPrefix(err.Error(), "toml: ")
	}
	return doc["v"], ""
}
