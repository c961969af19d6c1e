package testutil

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CgroupDir makes a fresh directory inside a cgroup2 mount, for a
// daemon's `cgroup = DIR` (its groups go in DIR/tend-<state dir id>): in
// this machine's cgroup2 mount, or in one mounted for the test. It skips
// the test, saying why, where neither can be had (not root, no cgroup2).
// At the end every group below it is killed (cgroup.kill) and removed,
// children first, so a failed test leaves neither a process nor a group
// behind.
func CgroupDir(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root (CI is root)")
	}
	mount := Cgroup2Mount()
	if mount == "" {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "cgroup2", "none", dir).CombinedOutput(); err != nil {
			t.Skipf("no cgroup2 mount, and mount -t cgroup2 failed: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		mount = dir
	}
	b := make([]byte, 4)
	rand.Read(b)
	dir := filepath.Join(mount, "tend-test-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeGroups(dir) })
	return dir
}

// Cgroup2Mount is where this machine mounts cgroup2, or "".
func Cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	return ""
}

// removeGroups kills what is left in dir's groups and removes them,
// children first.
func removeGroups(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeGroups(filepath.Join(dir, e.Name()))
		}
	}
	if Populated(dir) {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		for deadline := time.Now().Add(10 * time.Second); Populated(dir) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	os.Remove(dir)
}

// Populated reports whether the group dir (or a group below it) has a
// process, as its cgroup.events says.
func Populated(dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return bytes.Contains(b, []byte("populated 1"))
}
