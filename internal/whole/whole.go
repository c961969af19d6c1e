// Package whole puts together what the lean CLI leaves out, for cli.Main
// in the binaries that are the whole tend (cmd/tend, and the tests that
// re-execute themselves as it): the daemon, the attach WebSocket and the
// terminal emulator (docs/cli.md#two-files).
package whole

import (
	"context"

	"github.com/tend-sh/tend/internal/cli"
	"github.com/tend-sh/tend/internal/client/ws"
	"github.com/tend-sh/tend/internal/daemon"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Parts are the whole tend's.
var Parts = cli.Parts{
	Daemon: func(ctx context.Context, r cli.UpRequest) error {
		return daemon.Run(ctx, daemon.Options{ConfigPath: r.ConfigPath, JSON: r.JSON, Stderr: r.Stderr, Format: cli.FormatEvent, Version: r.Version})
	},
	Attach: ws.Attach,
	Screen: func(cols, rows int) cli.Emulator { return cellScreen{vt.NewScreen(vt.Size{Cols: cols, Rows: rows})} },
}

// cellScreen is vt's screen resized in cells, as an attach asks.
type cellScreen struct{ *vt.Screen }

func (s cellScreen) Resize(cols, rows int) { s.Screen.Resize(vt.Size{Cols: cols, Rows: rows}) }
