package testutil

import (
	"path/filepath"
	"testing"

	"github.com/tend-sh/tend/internal/statedir"
)

// StateDir opens a fresh state directory for t, closed when t ends.
func StateDir(t testing.TB) *statedir.Dir {
	t.Helper()
	d, err := statedir.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
