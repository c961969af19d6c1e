// Command floor is the floor of bench/churn's run phase: a Go program that
// forks /bin/true (or its arguments) and waits for it, and nothing else.
// tend run --rm -a -- /bin/true is measured against this, exec'd the same
// way in the same run: what supervising one run costs above the fork, the
// exec and a Go program's start.
package main

import (
	"os"
	"os/exec"
)

func main() {
	argv := os.Args[1:]
	if len(argv) == 0 {
		argv = []string{"/bin/true"}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		os.Exit(127)
	}
}
