package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tend-sh/tend/internal/client"
)

// defaultConfig is the config file up reads, and the one other verbs look
// for to find the socket, when neither -c nor $TEND_CONFIG names one.
const defaultConfig = "tend.toml"

// socketPath finds the daemon's socket in docs/cli.md's order: --socket, the
// state dir of the config -c names, $TEND_SOCKET, the state dir of
// $TEND_CONFIG's config, then of the nearest tend.toml in the current
// directory or a parent (as git and compose find theirs). When nothing
// names a daemon, the error says where it looked (exit 4).
func (e *env) socketPath() (string, error) {
	if e.socket != "" {
		return e.socket, nil
	}
	if e.config != "" {
		return socketFromConfig(e.config)
	}
	if s := os.Getenv("TEND_SOCKET"); s != "" {
		return s, nil
	}
	path, err := findConfig()
	if err != nil {
		return "", err
	}
	return socketFromConfig(path)
}

// findConfig is the config file named by $TEND_CONFIG, else the nearest
// tend.toml upwards. (-c is the caller's to check first.)
func findConfig() (string, error) {
	if s := os.Getenv("TEND_CONFIG"); s != "" {
		return s, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: finding %s: %v", client.ErrNoDaemon, defaultConfig, err)
	}
	if path, ok := nearest(wd, defaultConfig); ok {
		return path, nil
	}
	return "", fmt.Errorf("%w: no %s in %s or any parent, and none of --socket, -c, $TEND_SOCKET, $TEND_CONFIG given",
		client.ErrNoDaemon, defaultConfig, wd)
}

// nearest is the path of name in dir or its closest ancestor that has one.
// A path made relative to the working directory reads better in messages,
// so one in dir itself is just name.
func nearest(dir, name string) (string, bool) {
	for d := dir; ; {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			if d == dir {
				return name, true
			}
			return p, true
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return p, true // there but unreadable: loading it says why
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

// client returns a client of the daemon found by socketPath. It dials
// through the socket's directory, opened once (client.NewHeld), so that
// every connection of this command reaches the same directory; and it
// talks only to a daemon of root or this user (docs/trust.md#sockets).
func (e *env) client() (*client.Client, error) {
	path, err := e.socketPath()
	if err != nil {
		return nil, err
	}
	c, release := client.NewHeld(path)
	e.held = append(e.held, release)
	return c, nil
}

// release closes the directories client opened.
func (e *env) release() {
	for _, f := range e.held {
		f()
	}
	e.held = nil
}
