package cli

import (
	"errors"
	"path/filepath"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
)

// socketFromConfig is the socket of the daemon that runs the config at
// path: tend.sock in its state dir. Only [daemon] state_dir is read, so a
// file with mistakes elsewhere still finds its daemon (tend reload then
// reports them). The one use of package config here.
func socketFromConfig(path string) (string, error) {
	dir, err := config.StateDir(path)
	if err != nil {
		if errors.Is(err, program.ErrBadConfig) {
			return "", configError{err.Error()}
		}
		return "", err
	}
	return filepath.Join(dir, "tend.sock"), nil
}
