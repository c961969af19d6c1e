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
	env := Env(s, 3, "")
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

// A NOTIFY_SOCKET in tend's own environment (systemd's, when tend runs as a
// notify service) never reaches a run: the instance's socket replaces it,
// and without one the run gets the spec's or none.
func TestEnvNotifySocketIsTheInstances(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	defer func(old func() []string) { baseEnv = old }(baseEnv)
	baseEnv = os.Environ
	notifyVars := func(env []string) (vals []string) {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "NOTIFY_SOCKET="); ok {
				vals = append(vals, v)
			}
		}
		return vals
	}
	s := &program.Spec{Name: "w"}
	if got := notifyVars(Env(s, 0, "/state/notify/w-0.sock")); !slices.Equal(got, []string{"/state/notify/w-0.sock"}) {
		t.Errorf("with a socket: NOTIFY_SOCKET %q", got)
	}
	if got := notifyVars(Env(s, 0, "")); len(got) != 0 {
		t.Errorf("without a socket: NOTIFY_SOCKET %q inherited from tend", got)
	}
	s.Env = map[string]string{"NOTIFY_SOCKET": "/custom"}
	if got := notifyVars(Env(s, 0, "")); !slices.Equal(got, []string{"/custom"}) {
		t.Errorf("the spec's own: NOTIFY_SOCKET %q", got)
	}
	if got := notifyVars(Env(s, 0, "/run/tend/x/w-0.sock")); !slices.Equal(got, []string{"/run/tend/x/w-0.sock"}) {
		t.Errorf("the instance's socket wins over the spec's: NOTIFY_SOCKET %q", got)
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
	if _, err := lookPath("data", "/", []string{"PATH=" + bin}); !errors.Is(err, syscall.EACCES) || Errno(err) != "EACCES" {
		t.Errorf("a file on PATH that is not executable: %v, want EACCES as a shell says", err)
	}
	if _, err := lookPath("nothing", "/", []string{"PATH=" + bin}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("a name on no PATH entry: %v", err)
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

// A run with a terminal gets TERM=xterm-256color, over tend's own TERM,
// unless its env sets one; a run without keeps tend's.
func TestEnvTermOfATerminal(t *testing.T) {
	t.Setenv("TERM", "dumb")
	defer func(old func() []string) { baseEnv = old }(baseEnv)
	baseEnv = os.Environ
	term := func(s *program.Spec) []string {
		var out []string
		for _, kv := range Env(s, 0, "") {
			if strings.HasPrefix(kv, "TERM=") {
				out = append(out, kv)
			}
		}
		return out
	}
	if got := term(&program.Spec{Name: "a", Tty: true}); !slices.Equal(got, []string{"TERM=xterm-256color"}) {
		t.Errorf("tty: %q", got)
	}
	if got := term(&program.Spec{Name: "a", Tty: true, Env: map[string]string{"TERM": "vt100"}}); !slices.Equal(got, []string{"TERM=vt100"}) {
		t.Errorf("tty with its own TERM: %q", got)
	}
	if got := term(&program.Spec{Name: "a"}); !slices.Equal(got, []string{"TERM=dumb"}) {
		t.Errorf("no tty: %q", got)
	}
}
