package measure

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// StaticEnv is the environment tend is built in everywhere it is shipped
// or measured: CGO_ENABLED=0, a static binary, as the Dockerfile and the
// README build it (bench/NOTES-issue22.md: cgo costs every exec about a
// millisecond, ld.so and libc's start).
func StaticEnv() []string { return append(os.Environ(), "CGO_ENABLED=0") }

// BuildTend builds the tend a benchmark runs into dir, from the module at
// root, and returns the path of the binary its phases exec (`tend up`, the
// verbs, `tend down`).
//
// This is the one place that knows how tend is built. When the binary is
// split into a lean CLI and a daemon that `tend up` execs, build both into
// dir here and return the CLI's path: nothing else in the benchmarks
// changes (the daemon's pid is still the pid of the `tend up` it starts, an
// exec keeping it).
func BuildTend(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "tend")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tend")
	build.Dir = root
	build.Env = StaticEnv()
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return bin, nil
}
