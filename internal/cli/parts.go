package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
)

// Parts are what a verb needs beyond the client and that only the whole
// tend links: the daemon (tend up), and for tend attach and tend run -a
// --tty the WebSocket to the run's terminal (net/http) and the terminal
// emulator they draw through. The whole tend (cmd/tend) passes them all. The lean CLI (cmd/tend-lean, installed as
// tend beside the whole one installed as tend-daemon) passes neither:
// linking them costs every verb about two milliseconds at start, the
// daemon's package initialisers included (docs/cli.md#two-files); a verb
// that needs one runs the same command line in tend-daemon instead, in
// this process's place.
type Parts struct {
	// Daemon runs tend up in this process until ctx ends or the daemon
	// stops.
	Daemon func(ctx context.Context, r UpRequest) error
	// Attach connects through c to the terminal of instance id.
	Attach func(ctx context.Context, c *client.Client, id string, readOnly bool) (client.Terminal, error)
	// Screen makes the emulator that follows a run's screen on the
	// caller's side of an attach, sized in cells.
	Screen func(cols, rows int) Emulator
}

// attaches says whether the parts hold what an attach needs.
func (p Parts) attaches() bool { return p.Attach != nil && p.Screen != nil }

// UpRequest is what tend up hands the daemon.
type UpRequest struct {
	ConfigPath string
	JSON       bool      // events on stderr as JSON lines
	Stderr     io.Writer // where the events go
	Version    string    // this binary's version, as tend version prints it
}

// Emulator is a terminal emulator's screen, as an attach uses one (the
// whole tend's is a *vt.Screen behind a small adapter).
type Emulator interface {
	Feed(p []byte)
	// TakeReplies returns, appended to dst, what the emulator would have
	// answered the program, and forgets it.
	TakeReplies(dst []byte) []byte
	// Redraw appends the bytes that paint the screen as it is.
	Redraw(dst []byte) []byte
	AltScreen() bool
	Resize(cols, rows int)
	// Inline drawing (tend run -a --tty) prints the rows as they are,
	// with colours, and puts the cursor and the modes keys depend on
	// back as the program left them.
	ANSI() string
	Cursor() (x, y int)
	AppCursor() bool
	BracketedPaste() bool
	CursorVisible() bool
}

// DaemonBinary is the name the whole tend is installed under beside the
// lean CLI.
const DaemonBinary = "tend-daemon"

// delegate runs this command line in the whole tend, tend-daemon found
// beside this binary or on PATH, in this process's place: exec keeps the
// pid, so a daemon started as tend up is still the process systemd and
// a shell started. It returns only when that cannot be done.
func (e *env) delegate(verb string) error {
	path, err := wholeTend()
	if err != nil {
		return fmt.Errorf("%s needs the whole tend, %s, beside this tend or on PATH, and %v (docs/cli.md#two-files)", verb, DaemonBinary, err)
	}
	e.release()
	err = unix.Exec(path, append([]string{path}, e.args...), os.Environ())
	return fmt.Errorf("%s: running %s: %w", verb, path, err)
}

// wholeTend finds tend-daemon: beside this binary first (an install
// puts the two together; a copy elsewhere on PATH may be another
// version), then on PATH.
func wholeTend() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), DaemonBinary)
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath(DaemonBinary)
	if errors.Is(err, exec.ErrNotFound) {
		return "", errors.New("there is none")
	}
	return p, err
}
