// Package daemon runs tend up: it loads the config, takes the state-dir lock,
// starts the reaper, the event log, the supervisors and the API, and stops
// them all on SIGTERM, SIGINT or tend down.
package daemon

import (
	"context"
	"errors"
	"io"
)

// ErrAlreadyRunning is returned when another daemon holds the state dir.
var ErrAlreadyRunning = errors.New("a tend daemon is already running")

// Options configure Run.
type Options struct {
	ConfigPath string    // the TOML file or Procfile
	JSON       bool      // event lines on Stderr as JSON instead of text
	Stderr     io.Writer // where event lines go
}

// Run runs the daemon in the foreground until ctx ends, a SIGTERM/SIGINT
// arrives or a client asks it to stop. Config errors wrap
// program.ErrBadConfig (exit 2); a held lock wraps ErrAlreadyRunning.
func Run(ctx context.Context, opts Options) error {
	return errors.New("not yet")
}
