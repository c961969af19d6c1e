// Command tend-lean is tend's CLI without the daemon and the terminal
// emulator linked, so that a verb's start costs little more than a Go
// hello world's: their package initialisers and weight cost every verb of
// the whole tend about two milliseconds (docs/cli.md#two-files). It is
// installed as tend, beside the whole tend (cmd/tend) installed as
// tend-daemon; tend up, tend attach and tend run --tty -a run the same
// command line in tend-daemon, in this process's place.
package main

import (
	"context"
	"os"

	"github.com/tend-sh/tend/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.Parts{}, os.Args[1:], os.Stdout, os.Stderr))
}
