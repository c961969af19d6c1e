package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// NeedTool returns the path of the program name, which a test drives (tmux
// as the terminal oracle, python3, a browser). Where it is missing the test
// is skipped, by Missing.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not installed", name)
	}
	return p
}

// Missing skips the test for want of what the message says, unless
// TEND_REQUIRE_TOOLS=1 (set by .ci/run, which installs every tool the tests
// drive): there it is a failure, so CI never passes by skipping the tests
// that judge tend against programs no one here wrote.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("TEND_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s, and TEND_REQUIRE_TOOLS=1 (.ci/run installs it)", msg)
	}
	t.Skip(msg)
}
