package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
)

// buildLean builds the lean CLI (cmd/tend-lean) into dir as tend.
func buildLean(t *testing.T, dir string) string {
	t.Helper()
	lean := filepath.Join(dir, "tend")
	cmd := exec.Command("go", "build", "-o", lean, "../tend-lean")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/tend-lean: %v\n%s", err, out)
	}
	return lean
}

// TestLeanCLI installs tend as docs/cli.md#two-files says: the lean CLI
// as tend, the whole tend beside it as tend-daemon (a copy of this test
// binary, which is the whole tend under that name). tend up becomes the daemon
// in the same process, the client verbs answer from the lean binary, a
// verb that needs the emulator (run --tty -a) runs in tend-daemon, tend
// version names the daemon's binary, before and after an upgrade in
// place. Alone, the lean CLI says what it misses.
func TestLeanCLI(t *testing.T) {
	dir := t.TempDir()
	lean := buildLean(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	replaceTend(t, filepath.Join(dir, "tend-daemon"), exe, "")
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[program.sleeper]\ncommand = [\"sleep\", \"1000\"]\n")
	up, stderr := startUpLogged(t, lean, conf)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	waitRunning(t, c, "sleeper:0")

	// The daemon is the process tend up started, running tend-daemon.
	if pid := daemonPID(t, dir); pid != up.Process.Pid {
		t.Errorf("the daemon is pid %d; tend up started %d", pid, up.Process.Pid)
	}
	if got, _ := os.Readlink("/proc/" + itoa(up.Process.Pid) + "/exe"); got != filepath.Join(dir, "tend-daemon") {
		t.Errorf("tend up runs %s; want the whole tend, %s", got, filepath.Join(dir, "tend-daemon"))
	}

	if code, out, errOut := tendRun(t, lean, "-c", conf, "ps"); code != 0 || !strings.Contains(out, "sleeper:0") || !strings.Contains(out, "running") {
		t.Errorf("tend ps: exit %d\n%s%s", code, out, errOut)
	}
	from := leanVersion(t, lean, c)
	code, out, errOut := tendRun(t, lean, "-c", conf, "run", "--tty", "-a", "--rm", "--", "sh", "-c", "echo lean-says-hello")
	if code != 0 || !strings.Contains(out, "lean-says-hello") {
		t.Errorf("tend run --tty -a through tend-daemon: exit %d\n%s%s", code, out, errOut)
	}

	// An upgrade re-executes tend-daemon, the file now at its path, in the
	// same process; tend version names the new one.
	replaceTend(t, filepath.Join(dir, "tend-daemon"), exe, "\n# the next build\n")
	code, out, errOut = tendRun(t, lean, "-c", conf, "upgrade")
	if to := leanVersion(t, lean, c); code != 0 || from == to || strings.TrimSpace(out) != "upgraded from "+from+" to "+to {
		t.Errorf("tend upgrade: exit %d, %q%s; versions %s, %s\n%s", code, out, errOut, from, to, stderr())
	}
	if pid := daemonPID(t, dir); pid != up.Process.Pid {
		t.Errorf("after the upgrade the daemon is pid %d; tend up started %d", pid, up.Process.Pid)
	}

	if code, out, errOut := tendRun(t, lean, "-c", conf, "down"); code != 0 {
		t.Errorf("tend down: exit %d\n%s%s", code, out, errOut)
	}
	if err := up.Wait(); err != nil {
		t.Errorf("tend up: %v\n%s", err, stderr())
	}

	// Alone, with no tend-daemon beside it or on PATH.
	alone := filepath.Join(t.TempDir(), "tend")
	if err := os.Link(lean, alone); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alone, "up", "-c", conf)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(b), "tend: up needs the whole tend, tend-daemon, beside this tend or on PATH") || !strings.Contains(string(b), "docs/cli.md#two-files") {
		t.Errorf("tend up without tend-daemon: %v\n%s", err, b)
	}
}

// leanVersion is what tend version prints as the version, checked against
// the version the daemon answers with.
func leanVersion(t *testing.T, lean string, c *client.Client) string {
	t.Helper()
	_, out, _ := tendRun(t, lean, "version")
	f := strings.Fields(out)
	if len(f) < 2 {
		t.Fatalf("tend version printed %q", out)
	}
	if h, err := c.Health(); err != nil || h != f[1] {
		t.Errorf("tend version says %s; the daemon runs %q (%v)", f[1], h, err)
	}
	return f[1]
}
