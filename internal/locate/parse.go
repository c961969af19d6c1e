package locate

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// parse reads data's statements one at a time with the parser package
// config decodes with (so both take and refuse the same text), building
// nothing, and follows every way TOML can set daemon.state_dir: under a
// [daemon] header, a dotted key (daemon.state_dir = ...), an inline table
// (daemon = {state_dir = ...}). It stops at the first header after
// [daemon]: nothing later in a valid document can change the answer (a
// second [daemon] or a state_dir set twice is an error, a [daemon.x] sets
// daemon.x), so a config that puts [daemon] first is answered from its
// first lines, and mistakes after it never hide the daemon. A daemon that
// is not a table is an error, as it is to the daemon. It does not enforce
// what only the decoder does (a key defined twice, a value out of range):
// such a document fails to load in the daemon, and which state_dir is
// reported for it matters little.
func parse(file string, data []byte) (string, error) {
	if !bytes.Contains(data, []byte("daemon")) && !bytes.Contains(data, []byte(`\u`)) && !bytes.Contains(data, []byte(`\U`)) {
		return "", nil // no key can spell daemon: most configs of a big fleet
	}
	var p unstable.Parser
	p.Reset(data)
	var table []string // the table of the key/values that follow
	sd := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			if len(table) == 1 && table[0] == "daemon" {
				return sd, nil // [daemon] ended: see above
			}
			table = keyParts(e)
			if e.Kind == unstable.ArrayTable && len(table) == 1 && table[0] == "daemon" {
				return "", notTable(file, data, e, "an array of tables")
			}
		case unstable.KeyValue:
			v, err := setting(append(slices.Clip(table), keyParts(e)...), e.Value())
			if err != "" {
				return "", notTable(file, data, e, err)
			}
			if v != nil {
				sd = *v
			}
		}
	}
	if err := p.Error(); err != nil {
		le := &Error{File: file, Line: 1, Msg: err.Error(), Err: err}
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			le.Msg, le.Line = pe.Message, lineOf(data, pe.Highlight)
		}
		return "", le
	}
	return sd, nil
}

// setting is what a key/value with the whole key path sets of
// daemon.state_dir: a pointer to it (the empty string when it is not a
// string: the default), nil when the key/value is about something else,
// or what daemon is instead of a table.
func setting(path []string, v *unstable.Node) (*string, string) {
	none := ""
	switch {
	case len(path) == 0 || path[0] != "daemon":
		return nil, ""
	case len(path) == 1 && v.Kind != unstable.InlineTable:
		return nil, kindName(v.Kind)
	case len(path) == 1:
		var set *string
		for it := v.Children(); it.Next(); {
			kv := it.Node()
			if s, _ := setting(append([]string{"daemon"}, keyParts(kv)...), kv.Value()); s != nil {
				set = s
			}
		}
		return set, ""
	case path[1] != "state_dir":
		return nil, ""
	case len(path) == 2 && v.Kind == unstable.String:
		s := string(v.Data)
		return &s, ""
	}
	return &none, "" // a table or another type: the default
}

// notTable is the error for a daemon that is not a table.
func notTable(file string, data []byte, e *unstable.Node, what string) error {
	it := e.Key()
	it.Next()
	return &Error{File: file, Line: lineAt(data, int(it.Node().Raw.Offset)), Key: "daemon",
		Msg: fmt.Sprintf("must be a table like [daemon], not %s", what)}
}

// kindName names a value's type in messages.
func kindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Bool:
		return "a boolean"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Array:
		return "an array"
	}
	return "a date or time"
}

func keyParts(e *unstable.Node) []string {
	var parts []string
	for it := e.Key(); it.Next(); {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// lineAt is the 1-based line of the byte at offset off of data.
func lineAt(data []byte, off int) int {
	return 1 + bytes.Count(data[:min(off, len(data))], []byte{'\n'})
}

// lineOf is the line of b, a slice of data (the end when it is not one).
func lineOf(data, b []byte) int {
	off := len(data)
	if o := cap(data) - cap(b); b != nil && o >= 0 && o <= len(data) {
		off = o
	}
	return lineAt(data, off)
}
