package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBinaryPath: an upgrade re-executes the path the daemon was started
// as when it leads to this binary (through a symlink an installer may
// point elsewhere next), else the binary the kernel ran.
func TestBinaryPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "tend-daemon")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.Symlink("/bin/sh", other); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, c := range []struct{ argv0, want string }{
		{link, link},
		{"./tend-daemon", link},
		{other, exe},         // another binary: not this one's path
		{"tend-daemon", exe}, // found on PATH: the kernel's answer
		{"/no/such/tend", exe},
	} {
		if got, err := binaryPath(c.argv0); err != nil || got != c.want {
			t.Errorf("started as %q: %q, %v; want %q", c.argv0, got, err, c.want)
		}
	}
}
