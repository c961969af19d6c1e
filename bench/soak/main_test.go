//go:build soak

package soak

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/tend-sh/tend/internal/cli"
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/whole"
)

var (
	soakDuration = flag.Duration("soak.duration", 60*time.Second,
		"how long the chaos runs, in two halves around the daemon's SIGKILL")
	soakKeep = flag.Bool("soak.keep", false,
		"keep the work directory (config, state dir, daemon logs) even when the test passes")
	soakSeed = flag.Uint64("soak.seed", 0, "seed of the chaos's choices; 0 picks one (it is logged)")
)

// helperEnv names the helper a re-executed test binary should be: the
// notifiers' program is this binary with helperEnv=notifier.
const helperEnv = "TEND_SOAK_HELPER"

// notifyEvery is how often a notifier sends a heartbeat and a new STATUS=.
const notifyEvery = 500 * time.Millisecond

// TestMain makes the test binary the tend command when run as "tend" (the
// daemon and tend down run through a symlink of that name), and the
// notifiers' program when helperEnv says so.
func TestMain(m *testing.M) {
	roles.Be() // the shim or the keeper, when the daemon re-executes this binary as one
	switch {
	case filepath.Base(os.Args[0]) == "tend":
		os.Exit(cli.Main(context.Background(), whole.Parts, os.Args[1:], os.Stdout, os.Stderr))
	case os.Getenv(helperEnv) == "notifier":
		notifier()
	}
	os.Exit(m.Run())
}

// notifier is the notifiers' program: READY=1, then every notifyEvery a
// WATCHDOG=1 heartbeat with a new STATUS=. A failed send is not fatal:
// between the daemon's SIGKILL and its restart nobody listens, and the next
// send reaches the new daemon on the socket it binds again. It runs until a
// signal ends it.
func notifier() {
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	for n := 1; ; n++ {
		time.Sleep(notifyEvery)
		_, _ = daemon.SdNotify(false, fmt.Sprintf("WATCHDOG=1\nSTATUS=beat %d", n))
	}
}
