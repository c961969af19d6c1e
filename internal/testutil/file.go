package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to name in a fresh temporary directory and
// returns its path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
