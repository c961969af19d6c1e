package config

import (
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// index maps each key path of a TOML document to the line it first appears
// on. Decoding into maps loses positions, yet every problem found after
// decoding (a bad duration, a missing command) must still name its line, and
// programs must keep file order; go-toml's unstable parser gives the
// positions of keys.
type index struct {
	lines      map[string]int // pathKey(path) -> 1-based line of first appearance
	lineStarts []int          // byte offset at which each line starts
	table      []string       // the table open after the last expression indexed
}

// pathKey joins a path unambiguously: a quoted TOML key may contain dots.
func pathKey(path []string) string { return strings.Join(path, "\x00") }

// newIndex starts the index of a document: decodeTOML adds each expression
// as it decodes it, so the document is parsed once.
func newIndex(data []byte) *index {
	ix := &index{lines: make(map[string]int), lineStarts: []int{0}}
	for i, b := range data {
		if b == '\n' {
			ix.lineStarts = append(ix.lineStarts, i+1)
		}
	}
	return ix
}

// expression indexes one top-level expression and returns the line of its
// key.
func (ix *index) expression(e *unstable.Node) int {
	var line int
	switch e.Kind {
	case unstable.Table, unstable.ArrayTable:
		it := e.Key()
		ix.table, line = ix.recordKey(nil, &it)
	case unstable.KeyValue:
		line, _ = ix.recordKeyValue(ix.table, e)
	}
	return line
}

// recordKeyValue records the key of a key/value node under table, and the
// keys of an inline table value below it. It returns the line of this key and
// its full path.
func (ix *index) recordKeyValue(table []string, kv *unstable.Node) (int, []string) {
	it := kv.Key()
	path, line := ix.recordKey(table, &it)
	if v := kv.Value(); v.Kind == unstable.InlineTable {
		children := v.Children()
		for children.Next() {
			if c := children.Node(); c.Kind == unstable.KeyValue {
				ix.recordKeyValue(path, c)
			}
		}
	}
	return line, path
}

// recordKey records every prefix of a dotted key below base (so `a.b.c = 1`
// also places tables a and a.b). It returns the full path and the line of
// this occurrence of the key.
func (ix *index) recordKey(base []string, it *unstable.Iterator) ([]string, int) {
	path := slices.Clone(base)
	line := 0
	for it.Next() {
		n := it.Node()
		path = append(path, string(n.Data))
		line = ix.lineOf(int(n.Raw.Offset))
		k := pathKey(path)
		if _, ok := ix.lines[k]; !ok {
			ix.lines[k] = line
		}
	}
	return path, line
}

func (ix *index) lineOf(offset int) int {
	i, found := slices.BinarySearch(ix.lineStarts, offset)
	if found {
		return i + 1
	}
	return i
}

// line is the line of path, or of its nearest ancestor that appears in the
// document (a missing key is reported at its table); 0 if none does.
func (ix *index) line(path []string) int {
	for n := len(path); n > 0; n-- {
		if l, ok := ix.lines[pathKey(path[:n])]; ok {
			return l
		}
	}
	return 0
}
