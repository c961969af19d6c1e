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
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/whole"
)

func main() {
	roles.Be() // the exec shim or the terminal keeper, re-executed by the daemon
	// Nothing in tend reads heap profiles; sampling allocations keeps a
	// bucket table (about a megabyte touched) alive in a daemon that
	// should weigh little.
	runtime.MemProfileRate = 0
	os.Exit(cli.Main(context.Background(), whole.Parts, os.Args[1:], os.Stdout, os.Stderr))
}
