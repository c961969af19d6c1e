// Command tend supervises fleets of AI agents and job workers. Everything
// lives in internal/cli; the daemon (tend up) handles its own signals.
package main

import (
	"context"
	"os"

	"github.com/tend-sh/tend/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
