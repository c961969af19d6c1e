package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tendBuild is the one build of tend per test binary (TendBinary).
var tendBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// TendBinary builds tend (./cmd/tend of this module) once per test binary
// and returns its path, for tests that run tend as a user does: a real
// binary, not the test binary re-executed. The build lands in a directory
// of its own under the temporary directory.
func TendBinary(t testing.TB) string {
	t.Helper()
	b := &tendBuild
	b.once.Do(func() {
		var gomod []byte
		if gomod, b.err = exec.Command("go", "env", "GOMOD").Output(); b.err != nil {
			return
		}
		var dir string
		if dir, b.err = os.MkdirTemp("", "tendbin"); b.err != nil {
			return
		}
		b.path = filepath.Join(dir, "tend")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/tend")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build ./cmd/tend: %v\n%s", b.err, b.out)
	}
	return b.path
}
