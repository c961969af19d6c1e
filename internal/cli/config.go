package cli

import (
	"errors"
	"path/filepath"

	"github.com/tend-sh/tend/internal/locate"
	"github.com/tend-sh/tend/internal/program"
)

// socketFromConfig is the socket of the daemon that runs the config at
// path: tend.sock in its state dir. Only [daemon] state_dir is read, and
// without decoding the rest (package locate), so a file with mistakes
// elsewhere still finds its daemon (tend reload then reports them), and a
// verb's exec does not pay for decoding 10,000 programs (docs/cli.md).
func socketFromConfig(path string) (string, error) {
	dir, err := locate.StateDir(path)
	if err != nil {
		if errors.Is(err, program.ErrBadConfig) {
			return "", configError{err.Error()}
		}
		return "", err
	}
	return filepath.Join(dir, locate.Socket), nil
}
