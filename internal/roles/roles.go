// Package roles starts the processes tend's binary runs as besides the CLI
// and the daemon: the exec shim a run's fork becomes until its execve
// (internal/spawn), and the terminal keeper that holds every tty run's
// terminal across daemon restarts (internal/keeper). The daemon re-executes
// its own binary (/proc/self/exe) with a role's argv[0] and marker; main
// asks here first, explicitly, as tailscaled's be-child does, rather than
// each package taking the process over from an init() (docs/daemon.md).
// The cgroup holder is a verb of the CLI (tend cgroup-hold).
package roles

import (
	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/spawn"
)

// Be becomes the role this process was started as, and then never
// returns; a process started as the CLI returns at once. A test binary
// that starts runs or a keeper calls it first in its TestMain, since it
// is the binary the daemon re-executes.
func Be() {
	spawn.MaybeShim()
	keeper.MaybeServe()
}
