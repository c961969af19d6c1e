// Command tend supervises fleets of AI agents and job workers. This is the
// whole of tend in one file: the daemon (tend up), its roles and every
// verb. Everything lives in internal/cli; the daemon handles its own
// signals. Installed beside the lean CLI (cmd/tend-lean), it goes by
// tend-daemon (docs/cli.md#two-files).
package main

// The man pages are generated from the command tree (a test checks that
// the committed ones match it).
//go:generate go run . man ../../docs/man

import (
	"context"
	"os"
	"runtime"

	"github.com/tend-sh/tend/internal/cli"
	"github.com/tend-sh/tend/internal/client/ws"
	"github.com/tend-sh/tend/internal/daemon"
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

func main() {
	roles.Be() // the exec shim or the terminal keeper, re-executed by the daemon
	// Nothing in tend reads heap profiles; sampling allocations keeps a
	// bucket table (about a megabyte touched) alive in a daemon that
	// should weigh little.
	runtime.MemProfileRate = 0
	os.Exit(cli.Main(context.Background(), parts, os.Args[1:], os.Stdout, os.Stderr))
}

// parts are what the lean CLI leaves out: the daemon, the WebSocket of an
// attach and the emulator.
var parts = cli.Parts{
	Daemon: func(ctx context.Context, r cli.UpRequest) error {
		return daemon.Run(ctx, daemon.Options{ConfigPath: r.ConfigPath, JSON: r.JSON, Stderr: r.Stderr, Format: cli.FormatEvent, Version: r.Version})
	},
	Attach: ws.Attach,
	Screen: func(cols, rows int) cli.Emulator { return cellScreen{vt.NewScreen(vt.Size{Cols: cols, Rows: rows})} },
}

// cellScreen is vt's screen resized in cells, as an attach asks.
type cellScreen struct{ *vt.Screen }

func (s cellScreen) Resize(cols, rows int) { s.Screen.Resize(vt.Size{Cols: cols, Rows: rows}) }
