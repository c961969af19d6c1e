// Package config turns a TOML file (docs/config.md), a Procfile, or a program
// posted to the API into program specs that are fully defaulted and
// validated: nothing downstream knows about defaults or checks values again.
//
// Every problem is reported, not just the first, each as
// "file:line: key: what is wrong" (see Error). The documented defaults (docs/config.md) live in
// defaults.go; [defaults] in a file overrides them key by key, and a
// program's own keys override both.
package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	find "github.com/tend-sh/tend/internal/locate"
	"github.com/tend-sh/tend/internal/program"
)

// Load reads the configuration at path. A file named "Procfile",
// "Procfile.*" or "*.procfile" is a Procfile; anything else is TOML.
func Load(path string) (*program.Config, error) {
	cfg, _, err := LoadWithDefaults(path)
	return cfg, err
}

// LoadWithDefaults is Load that also returns the file's [defaults], so that
// programs added later over the API inherit them like the file's own
// programs (see Defaults.ParseProgramJSON).
func LoadWithDefaults(path string) (*program.Config, *Defaults, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err
		}
		return nil, nil, Errors{{File: path, Msg: "cannot read config: " + cause.Error(), Err: err}}
	}
	return ParseWithDefaults(path, data)
}

// ParseWithDefaults is LoadWithDefaults of the file at path holding data:
// the text a daemon loaded, parsed again by the binary it upgraded to.
func ParseWithDefaults(path string, data []byte) (*program.Config, *Defaults, error) {
	if find.IsProcfile(path) { // the names clients know too
		cfg, err := ParseProcfile(path, data)
		if err != nil {
			return nil, nil, err
		}
		return cfg, &Defaults{}, nil
	}
	return parseTOML(path, data)
}

// ParseTOML decodes a TOML configuration. file names it in messages, and its
// directory is where relative paths (state_dir, cwd) resolve.
func ParseTOML(file string, data []byte) (*program.Config, error) {
	cfg, _, err := parseTOML(file, data)
	return cfg, err
}

// ParseTOMLWithDefaults is ParseTOML that also returns the file's [defaults].
func ParseTOMLWithDefaults(file string, data []byte) (*program.Config, *Defaults, error) {
	return parseTOML(file, data)
}

// Defaults is the [defaults] table of a loaded file, already validated. The
// zero value and nil are "no [defaults]": the documented defaults (docs/config.md) only.
type Defaults struct {
	table map[string]any // as decoded; never modified
}

// view is the layer [defaults] adds below a program's own table.
func (d *Defaults) view() view {
	if d == nil || d.table == nil {
		return nil
	}
	return view{{table: d.table, path: []string{"defaults"}}}
}

// locate is the absolute path of file and its directory. Abs fails only
// when the working directory is gone; the cleaned path is the best left.
func locate(file string) (abs, dir string) {
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = filepath.Clean(file)
	}
	return abs, filepath.Dir(abs)
}
