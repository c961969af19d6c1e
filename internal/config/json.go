package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"

	"github.com/tend-sh/tend/internal/program"
)

// ParseProgramJSON decodes the body of POST /v1/programs: a JSON object with
// "name" and any program key of docs/config.md, with the value types TOML has
// (durations and sizes as strings, sizes also as integers of bytes, "probe",
// "logs" and "env" as objects). Unknown keys are an error, null is the same
// as leaving a key out, and a relative cwd resolves against baseDir. Keys
// take the documented defaults (docs/config.md); Defaults.ParseProgramJSON also applies a file's
// [defaults]. Errors match program.ErrInvalid.
func ParseProgramJSON(data []byte, baseDir string) (program.Spec, error) {
	return (*Defaults)(nil).ParseProgramJSON(data, baseDir)
}

// ParseProgramJSON is ParseProgramJSON with d's keys applied to whatever the
// body leaves out. d may be nil.
func (d *Defaults) ParseProgramJSON(data []byte, baseDir string) (program.Spec, error) {
	c := &collector{invalid: true}
	body, err := decodeObject(data)
	if err != nil {
		c.add(nil, err.Error())
		return program.Spec{}, c.err()
	}
	c.unknownKeys(nil, body, slices.Concat(apiOnlyKeys, programKeys))
	own := view{{table: body}}
	var name string
	if path, ok := c.setString(own, "name", &name); !ok && path == nil {
		c.add([]string{"name"}, "missing: every program needs a name")
	} else if ok && !program.ValidName(name) {
		c.add(path, badName(name))
	}
	base, _ := locate(baseDir)
	pd := &programDecoder{collector: c, baseDir: base, minInstances: 0}
	spec := pd.decode(name, nil, append(own, d.view()...), true)
	pd.removeOnExit(own, &spec)
	if err := c.err(); err != nil {
		return program.Spec{}, err
	}
	return spec, nil
}

// apiOnlyKeys are the keys of a POST /v1/programs body that a config file
// does not have.
var apiOnlyKeys = []string{"name", "remove_on_exit"}

// removeOnExit reads remove_on_exit: the program goes once it has ended
// and will not restart, so a body that does not say restart gets
// restart = "never" (whatever [defaults] says), and one that says
// "always" is refused: it would never end.
func (d *programDecoder) removeOnExit(own view, s *program.Spec) {
	d.setBool(own, "remove_on_exit", &s.RemoveOnExit)
	if !s.RemoveOnExit {
		return
	}
	if !own.has("restart") {
		s.Restart = program.RestartNever
	} else if s.Restart == program.RestartAlways {
		d.add([]string{"restart"}, `"always" with remove_on_exit would never end: use "on-failure" or "never"`)
	}
}

// decodeObject reads one JSON object into the value types go-toml produces
// (int64 and float64 for numbers), so the same decoder checks both.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("invalid JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: unexpected data after the object")
	}
	obj, ok := normalize(v).(map[string]any)
	if !ok {
		return nil, errors.New("the body must be a JSON object")
	}
	return obj, nil
}

// normalize converts json.Number to int64 or float64 and drops null members
// of objects, recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, val := range x {
			if val == nil {
				delete(x, k)
			} else {
				x[k] = normalize(val)
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	}
	return v
}
