package config

import (
	"os"

	find "github.com/tend-sh/tend/internal/locate"
	"github.com/tend-sh/tend/internal/program"
)

// Problem is a value of a loaded configuration that turns out wrong only
// later, by what the host can do: a cgroup limit it cannot enforce, a
// cgroup directory it cannot use.
type Problem struct {
	Program string // the program whose key it is; "" for a key of [daemon]
	Key     string // the key, e.g. "memory_max" or "cgroup"
	Msg     string // what is wrong
}

// Locate reports problems found after cfg was loaded as config errors, each
// "file:line: key: msg" like those found while loading (nil for none). A
// loaded config keeps no lines, so the file is decoded again to find them:
// that costs nothing until there is a problem, and the line given is where
// the key is in the file now, which is the one a person will edit. A key a
// program inherits from [defaults] is reported there, once for every
// program. cfg nil stands for an API request body: the keys alone, as
// program.ErrInvalid.
func Locate(cfg *program.Config, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	if cfg == nil {
		c := &collector{invalid: true}
		for _, p := range problems {
			c.add([]string{p.Key}, p.Msg)
		}
		return c.err()
	}
	c := &collector{file: cfg.File}
	var doc map[string]any
	if data, err := os.ReadFile(cfg.File); err == nil && !find.IsProcfile(cfg.File) {
		if d, ix, err := decodeTOML(data); err == nil {
			doc, c.index = d, ix
		}
	}
	for _, p := range problems {
		c.add(keyPath(doc, p.Program, p.Key), p.Msg)
	}
	return c.err()
}

// keyPath is where a program's key (or, without a program, a key of
// [daemon]) is set in doc: the program's own table, else [defaults].
func keyPath(doc map[string]any, name, key string) []string {
	if name == "" {
		return []string{"daemon", key}
	}
	own := []string{"program", name, key}
	programs, _ := doc["program"].(map[string]any)
	if table, _ := programs[name].(map[string]any); table != nil {
		if _, ok := table[key]; ok {
			return own
		}
	}
	if defaults, _ := doc["defaults"].(map[string]any); defaults != nil {
		if _, ok := defaults[key]; ok {
			return []string{"defaults", key}
		}
	}
	return own
}
