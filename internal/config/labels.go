package config

import (
	"fmt"

	"github.com/tend-sh/tend/internal/program"
)

// setLabels reads labels = { KEY = "VALUE" }. Unlike the other keys it
// merges across the layers, key by key, the program's own winning over
// [defaults]: a default label (fleet = "prod") marks every program, and a
// program adding its own (role = "planner") does not lose it. Each problem
// names the label it is about.
func (c *collector) setLabels(v view, dst *map[string]string) {
	var out map[string]string
	bad := false
	for i := len(v) - 1; i >= 0; i-- { // [defaults] first, the program's own last
		l := v[i]
		val, ok := l.table["labels"]
		if !ok {
			continue
		}
		path := join(l.path, "labels")
		table, isTable := val.(map[string]any)
		if !isTable {
			c.wrongType(path, `a table of strings like { session = "s-42" }`, val)
			bad = true
			continue
		}
		for _, k := range sortedKeys(table) {
			s, isString := table[k].(string)
			switch {
			case program.LabelKeyProblem(k) != "":
				c.add(join(path, k), program.LabelKeyProblem(k))
				bad = true
			case !isString:
				c.wrongType(join(path, k), "a string", table[k])
				bad = true
			case program.LabelValueProblem(s) != "":
				c.add(join(path, k), "label value: "+program.LabelValueProblem(s))
				bad = true
			default:
				if out == nil {
					out = make(map[string]string, len(table))
				}
				out[k] = s
			}
		}
	}
	if len(out) > program.MaxLabels {
		c.add(v.blame("labels"), fmt.Sprintf("%d labels, the most a program may have is %d", len(out), program.MaxLabels))
		bad = true
	}
	if !bad {
		*dst = out
	}
}
