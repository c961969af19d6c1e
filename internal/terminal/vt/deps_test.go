package vt

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tend-sh/tend/"

// deps is what pkg links, as go list -deps says (the build's own view,
// build tags and all).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list what packages link")
	}
	out, err := exec.Command(goBin, "list", "-deps", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// TestTheEmulatorLinksNoPTY keeps this package pure (docs/terminal.md):
// it imports nothing of tend's and no system interface, so that the
// packages that only read screens, type keys or turn a terminal's bytes
// into log lines (the API, the process layer, the CLI's attach) use it
// without linking the pty and epoll code of package terminal. (The CLI's
// verbs are held to it by internal/cli's TestCLIPathDeps: the cli package
// as a whole links the daemon, for up.)
func TestTheEmulatorLinksNoPTY(t *testing.T) {
	for _, p := range deps(t, "internal/terminal/vt") {
		if strings.HasPrefix(p, module) && p != module+"internal/terminal/vt" ||
			strings.HasPrefix(p, "golang.org/x/sys") || strings.HasPrefix(p, "github.com/creack/pty") {
			t.Errorf("internal/terminal/vt links %s; it must link nothing of tend's and no system interface", p)
		}
	}
	for _, pkg := range []string{"internal/api", "internal/spawn"} {
		linked := deps(t, pkg)
		if !strings.Contains(" "+strings.Join(linked, " ")+" ", " "+module+"internal/terminal/vt ") {
			t.Errorf("%s does not link internal/terminal/vt: is this test still looking at the right thing?", pkg)
		}
		for _, p := range linked {
			if p == module+"internal/terminal" || strings.HasPrefix(p, "github.com/creack/pty") {
				t.Errorf("%s links %s: it may use the emulator (internal/terminal/vt), not the pty code", pkg, p)
			}
		}
	}
}
