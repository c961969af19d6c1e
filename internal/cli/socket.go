package cli

import (
	"os"
	"path/filepath"

	"github.com/tend-sh/tend/internal/client"
)

// defaultConfig is the config file up reads, and the one other verbs look
// for to find the socket, when -c is not given.
const defaultConfig = "tend.toml"

// socketPath finds the daemon's socket: --socket, else $TEND_SOCKET, else
// the state dir of the config named by -c, else of ./tend.toml if it
// exists, else .tend/tend.sock (the default state dir).
func (e *env) socketPath() (string, error) {
	if e.socket != "" {
		return e.socket, nil
	}
	if s := os.Getenv("TEND_SOCKET"); s != "" {
		return s, nil
	}
	cfg := e.config
	if cfg == "" {
		if _, err := os.Stat(defaultConfig); err == nil {
			cfg = defaultConfig
		}
	}
	if cfg != "" {
		return socketFromConfig(cfg)
	}
	return filepath.Join(".tend", "tend.sock"), nil
}

// client returns a client of the daemon found by socketPath.
func (e *env) client() (*client.Client, error) {
	path, err := e.socketPath()
	if err != nil {
		return nil, err
	}
	return client.New(path), nil
}
