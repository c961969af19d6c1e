package config

import (
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"
)

// StateDir finds the state directory a config names, reading nothing but
// [daemon] state_dir: a client looking for the daemon's socket must still
// find it while the rest of the file is being edited (and is wrong). Only
// a file that cannot be read or parsed as TOML at all is an error.
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
	var doc struct {
		Daemon struct {
			StateDir any `toml:"state_dir"`
		} `toml:"daemon"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		if _, lerr := Load(path); lerr != nil {
			return "", lerr // not TOML at all: the full loader says where and why
		}
		return "", err
	}
	sd, ok := doc.Daemon.StateDir.(string)
	if !ok || sd == "" {
		sd = defaultStateDir
	}
	if !filepath.IsAbs(sd) {
		sd = filepath.Join(dir, sd)
	}
	return filepath.Clean(sd), nil
}
