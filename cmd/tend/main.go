// Command tend supervises fleets of AI agents and job workers. Everything
// lives in internal/cli; the daemon (tend up) handles its own signals.
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
)

func main() {
	roles.Be() // the exec shim or the terminal keeper, re-executed by the daemon
	// Nothing in tend reads heap profiles; sampling allocations keeps a
	// bucket table (about a megabyte touched) alive in a daemon that
	// should weigh little.
	runtime.MemProfileRate = 0
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
