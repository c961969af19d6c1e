package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

func TestEnvLayersTendsOwnTheSpecsAndTheInstance(t *testing.T) {
	t.Setenv("TEND_TEST_BASE", "from-tend")
	t.Setenv("TEND_TEST_OVER", "from-tend")
	s := &program.Spec{Name: "w", Env: map[string]string{"TEND_TEST_OVER": "from-spec", "QUEUE": "default"}}
	defer func(old func() []string) { baseEnv = old }(baseEnv)
	baseEnv = os.Environ // read the variables set above
	env := Env(s, 3)
	for _, want := range []string{"TEND_TEST_BASE=from-tend", "TEND_TEST_OVER=from-spec", "QUEUE=default", "TEND_ID=w:3", "TEND_PROGRAM=w", "TEND_INSTANCE=3"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "TEND_TEST_OVER=") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("TEND_TEST_OVER appears %d times", n)
	}
}

func TestLookPathUsesTheRunsPathAndCwd(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "data"), []byte("x"), 0o644)
	if p, err := lookPath("tool", "/", []string{"PATH=" + bin}); err != nil || p != filepath.Join(bin, "tool") {
		t.Errorf("tool on the run's PATH: %q %v", p, err)
	}
	if _, err := lookPath("data", "/", []string{"PATH=" + bin}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("a file that is not executable: %v", err)
	}
	if p, _ := lookPath("./bin/tool", dir, nil); p != filepath.Join(dir, "bin/tool") {
		t.Errorf("a relative path resolves against cwd: %q", p)
	}
	if e := Errno(fmt.Errorf("exec: %w", syscall.EACCES)); e != "EACCES" {
		t.Errorf("Errno: %q", e)
	}
	if e := Errno(&exec.Error{Name: "x", Err: exec.ErrNotFound}); e != "ENOENT" {
		t.Errorf("Errno of not found: %q", e)
	}
}
