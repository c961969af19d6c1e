package config

import (
	"slices"
	"sort"
)

// layer is one table a program's keys are looked up in.
type layer struct {
	table map[string]any
	path  []string // where the table sits, for messages: [program worker], [defaults], or [] for an API body
}

// view is the layers a program's keys come from, highest priority first: the
// program's own table, then [defaults]. The documented defaults (docs/config.md) are the values the
// decoder starts from.
type view []layer

func join(path []string, key string) []string {
	return append(slices.Clip(path), key)
}

// lookup finds key in the first layer that sets it, with the key's path.
func (v view) lookup(key string) (any, []string, bool) {
	for _, l := range v {
		if val, ok := l.table[key]; ok {
			return val, join(l.path, key), true
		}
	}
	return nil, nil, false
}

// has reports whether any layer sets key.
func (v view) has(key string) bool {
	_, _, ok := v.lookup(key)
	return ok
}

// owner cuts the view to the first layer that sets any of keys. Keys that are
// alternatives to each other (command and shell, probe exec and http) are
// inherited together: a program with shell does not also inherit a default
// command.
func (v view) owner(keys ...string) view {
	for i, l := range v {
		for _, k := range keys {
			if _, ok := l.table[k]; ok {
				return v[i : i+1]
			}
		}
	}
	return nil
}

// blame is the path to report a problem between keys at: the key set in the
// highest-priority layer, or the first key under the top layer when none is.
func (v view) blame(keys ...string) []string {
	for _, l := range v {
		for _, k := range keys {
			if _, ok := l.table[k]; ok {
				return join(l.path, k)
			}
		}
	}
	if len(v) == 0 {
		return []string{keys[0]}
	}
	return join(v[0].path, keys[0])
}

// sortedKeys is the keys of m in a fixed order, so problems are reported
// deterministically (the collector then sorts them by line).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
