//go:build vmtest

package vm

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain runs a helper program when tend starts this binary as one
// (TEND_VM_HELPER, as os/exec's tests re-execute themselves), else the
// tests, which talk to the fleet of configPath.
func TestMain(m *testing.M) {
	if h := os.Getenv("TEND_VM_HELPER"); h != "" {
		runHelper(h)
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the VM lane's tests run as root inside its guest (scripts/vm-test.sh)")
		os.Exit(2)
	}
	os.Setenv("TEND_CONFIG", configPath)
	os.Exit(m.Run())
}

// self is this binary: the command of the helper programs.
func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// configHead starts every test's config: the state directory of the
// shipped unit's example, short graces so a stop takes seconds.
const configHead = `[daemon]
state_dir = "/var/lib/tend"

[defaults]
stop_grace = "3s"
`

// sleeper is a program of plain long-running workers.
func sleeper(name string, instances int) string {
	return fmt.Sprintf("\n[program.%s]\ncommand = [\"/bin/sleep\", \"infinity\"]\ninstances = %d\n", name, instances)
}

// helper is a program run by this binary as helper h, with env and extra
// keys (TOML lines).
func helper(t *testing.T, name, h string, env map[string]string, extra ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n[program.%s]\ncommand = [%q]\n", name, self(t))
	fmt.Fprintf(&b, "env = { TEND_VM_HELPER = %q", h)
	for k, v := range env {
		fmt.Fprintf(&b, ", %s = %q", k, v)
	}
	b.WriteString(" }\n")
	for _, line := range extra {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// writeConfig writes the fleet's config file.
func writeConfig(t *testing.T, config string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(configPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeDropIn adds a drop-in to tend.service; startFleet reloads systemd's
// view of the unit, and the cleanup removes it.
func writeDropIn(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dropInDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropInDir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startFleet starts tend.service, the shipped unit (with dropIns, each
// the body of a drop-in file), on a fresh state directory with config, as
// `systemctl start tend` does for a user; the test's cleanup stops it and
// removes what it left. It returns when systemctl start returns.
func startFleet(t *testing.T, config string, dropIns ...string) {
	t.Helper()
	resetTend(t)
	for i, body := range dropIns {
		writeDropIn(t, fmt.Sprintf("50-vm-%d.conf", i), body)
	}
	t.Cleanup(func() {
		if t.Failed() {
			diagnose(t)
		}
		resetTend(t)
	})
	writeConfig(t, config)
	if err := os.MkdirAll(triggerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "systemctl", "daemon-reload")
	mustRun(t, "systemctl", "start", unitName)
}

// resetTend stops tend.service and removes everything a test left: the
// runs still in the runs' scope or the unit's cgroup (a tend killed
// outright leaves them, on purpose), the state directory, the config, the
// drop-ins, the triggers.
func resetTend(t *testing.T) {
	t.Helper()
	if out, err := run("systemctl", "stop", unitName); err != nil {
		t.Logf("systemctl stop %s: %v\n%s", unitName, err, out)
	}
	for _, unit := range []string{scopeName, unitName} {
		group := path.Join(sliceGroup, unit)
		if _, err := os.Stat(filepath.Join(cgroupRoot, group)); err != nil {
			continue
		}
		if left := cgProcs(group); len(left) > 0 {
			t.Logf("cleanup: killing what is left in %s: %v", group, left)
			_ = os.WriteFile(filepath.Join(cgroupRoot, group, "cgroup.kill"), []byte("1"), 0)
			deadline := time.Now().Add(30 * time.Second)
			for len(cgProcs(group)) > 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	_, _ = run("systemctl", "reset-failed", unitName, scopeName)
	for _, p := range []string{stateDir, filepath.Dir(configPath), triggerDir} {
		if err := os.RemoveAll(p); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
	if _, err := os.Stat(dropInDir); err == nil {
		_ = os.RemoveAll(dropInDir)
		_, _ = run("systemctl", "daemon-reload")
	}
	// The binary as installed from the payload (a test may replace it).
	if _, err := run("install", "-m", "0755", filepath.Join(payloadDir, "tend"), tendBin); err != nil {
		t.Logf("cleanup: reinstalling tend: %v", err)
	}
}

// diagnose logs what a person would look at when a test failed.
func diagnose(t *testing.T) {
	t.Helper()
	for _, c := range [][]string{
		{"systemctl", "status", unitName, "--no-pager", "-n", "0"},
		{"journalctl", "-u", unitName, "--no-pager", "-n", "60", "-o", "short-monotonic"},
		{"journalctl", "-u", scopeName, "--no-pager", "-n", "20", "-o", "short-monotonic"},
		{tendBin, "ps"},
		{"systemd-cgls", "--no-pager", "/system.slice/" + unitName},
		{"systemctl", "status", scopeName, "--no-pager", "-n", "10"},
		{"systemd-cgls", "--no-pager", "/system.slice/" + scopeName},
		// What systemd's forked child said when it could not start tend
		// (it logs with UNIT=, from outside the unit's cgroup).
		{"journalctl", "-b", "--no-pager", "-n", "10", "-o", "short-monotonic", "UNIT=" + unitName, "_PID=1", "+", "UNIT=" + unitName, "-g", "attach|cgroup"},
		{"cat", "/sys/fs/cgroup/system.slice/" + unitName + "/cgroup.subtree_control"},
	} {
		out, _ := run(c[0], c[1:]...)
		t.Logf("$ %s\n%s", strings.Join(c, " "), out)
	}
}
