package config

// index gives the line each key path of a TOML document first appears on.
// Decoding into maps loses positions, yet every problem found after
// decoding (a bad duration, a missing command) must still name its line, and
// programs must keep file order. It is the tree of keys decodeTOML builds to
// enforce the TOML rules, which knows where each key came from.
type index struct {
	root *tnode
}

// tkind is what defined a key, which decides how it may be extended (TOML
// 1.0: a table is defined once, a value never extended, a table made by
// dotted keys extended only by dotted keys or sub-table headers).
type tkind uint8

const (
	kValue      tkind = iota // a value, an inline table included
	kDotted                  // a table made by a dotted key (a.b = 1 makes a)
	kTable                   // a table made by a [header], or on the way to one
	kArrayTable              // an array of tables ([[header]])
)

var kindNames = [...]string{kValue: "value", kDotted: "kv-table", kTable: "table", kArrayTable: "array-table"}

// tnode is a table of the document as the rules see it, or a value.
type tnode struct {
	kind     tkind
	explicit bool           // kTable: defined by its own header, not only on the way to a longer one
	table    map[string]any // the decoded table (an array of tables: its last element); nil for a scalar
	kids     kids           // the keys below (an array of tables: those of its last element)
	holder   map[string]any // kArrayTable: the table holding the array, under name
	name     string
}

// scalarNode stands for every value but an inline table: nothing is below.
var scalarNode = &tnode{kind: kValue}

// kids are the keys of a table, each with its node and the line it first
// appeared on, in the order they appeared. A few are scanned, more get a
// hash map: go-toml scans a list of every key of the document instead,
// which is quadratic in the number of tables. Keeping each table's keys
// with it, not in one map for the document, keeps a lookup in memory the
// decoder has just touched.
type kids struct {
	list []kid
	idx  map[string]int // once there are more than smallKids
}

type kid struct {
	name string
	n    *tnode
	line int
}

const smallKids = 8

// get is the key name, or a zero kid.
func (k *kids) get(name string) kid {
	if k.idx != nil {
		if i, ok := k.idx[name]; ok {
			return k.list[i]
		}
		return kid{}
	}
	for _, c := range k.list {
		if c.name == name {
			return c
		}
	}
	return kid{}
}

// add adds a key get did not find.
func (k *kids) add(name string, n *tnode, line int) {
	k.list = append(k.list, kid{name, n, line})
	switch {
	case k.idx != nil:
		k.idx[name] = len(k.list) - 1
	case len(k.list) > smallKids:
		k.idx = make(map[string]int, 2*len(k.list))
		for i, c := range k.list {
			k.idx[c.name] = i
		}
	}
}

// line is the line of path, or of its nearest ancestor that appears in the
// document (a missing key is reported at its table); 0 if none does.
func (ix *index) line(path []string) int {
	line := 0
	n := ix.root
	for _, name := range path {
		c := n.kids.get(name)
		if c.n == nil {
			break
		}
		line, n = c.line, c.n
	}
	return line
}

// keys is the keys of the table at path, in the order they appeared.
func (ix *index) keys(path []string) []kid {
	n := ix.root
	for _, name := range path {
		if n = n.kids.get(name).n; n == nil {
			return nil
		}
	}
	return n.kids.list
}
