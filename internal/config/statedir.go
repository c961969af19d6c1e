package config

import (
	"os"
	"path/filepath"
)

// StateDir finds the state directory a config names, reading nothing but
// [daemon] state_dir: a client looking for the daemon's socket must still
// find it while the rest of the file is being edited (and is wrong). Only
// a file that cannot be read or parsed as TOML at all is an error. The
// decode is linear: a CLI run on a 10,000-program config pays little for it.
func StateDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(abs)
	data, err := os.ReadFile(abs)
	if err != nil {
		return "", Errors{{File: path, Msg: err.Error(), Err: err}}
	}
	if IsProcfile(abs) {
		return filepath.Join(dir, defaultStateDir), nil
	}
	doc, _, err := decodeTOML(data)
	if err != nil {
		return "", Errors{tomlError(path, data, err)}
	}
	daemon, isTable := doc["daemon"].(map[string]any)
	if !isTable && doc["daemon"] != nil {
		if _, lerr := Load(path); lerr != nil {
			return "", lerr // the full loader says where and why
		}
	}
	sd, ok := daemon["state_dir"].(string)
	if !ok || sd == "" {
		sd = defaultStateDir
	}
	if !filepath.IsAbs(sd) {
		sd = filepath.Join(dir, sd)
	}
	return filepath.Clean(sd), nil
}
