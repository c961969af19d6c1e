package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// checkBad asserts a config error at start: it names daemon.cgroup, wraps
// ErrBadConfig (exit 2) and says want.
func checkBad(t *testing.T, dir, mountinfo, want string) {
	t.Helper()
	tr, why, err := SetupAt(dir, "x", mountinfo, "/proc/self/cgroup")
	if tr != nil || why != "" || err == nil {
		t.Fatalf("SetupAt(%s) = %v, %q, %v; want an error", dir, tr, why, err)
	}
	var ce *ConfigError
	if !errors.Is(err, program.ErrBadConfig) || !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "daemon.cgroup: ") || !strings.Contains(err.Error(), want) {
		t.Errorf("SetupAt(%s): %v; want a *ConfigError daemon.cgroup: …%s…, wrapping ErrBadConfig", dir, err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error of more than one line: %q", err)
	}
}

func TestBadRelative(t *testing.T) {
	checkBad(t, "sys/fs/cgroup/tend", "/proc/self/mountinfo", `"sys/fs/cgroup/tend" is not an absolute path`)
}

func TestBadOutsideCgroup2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tend")
	checkBad(t, dir, "/proc/self/mountinfo", dir+" is not inside a cgroup2 mount (it is on ")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused directory was made: %v", err)
	}
}

func TestBadTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	checkBad(t, mnt+"/tend", "/proc/self/mountinfo", "is not inside a cgroup2 mount (it is on tmpfs mounted at "+mnt+")")
}

// A symbolic link into a tmpfs is judged by where it leads.
func TestBadSymlink(t *testing.T) {
	f := newFake(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "mountinfo")
	f.write(fake, "1 0 0:1 / / rw - ext4 /dev/root rw\n41 1 0:38 / "+filepath.Dir(link)+" rw - cgroup2 cgroup2 rw\n")
	checkBad(t, link+"/tend", fake, "is not inside a cgroup2 mount (it is on ext4 mounted at /)")
}

func TestBadV1(t *testing.T) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	ms, err := parseMountinfo(data)
	if err != nil {
		t.Fatal(err)
	}
	point := ""
	for _, m := range ms {
		if m.FSType == "cgroup" && (point == "" || strings.Contains(strings.Join(m.Super, ","), "memory")) {
			point = m.Point
		}
	}
	if point == "" {
		// No v1 hierarchy here: a fake mountinfo has one.
		f := newFake(t)
		point = filepath.Join(f.root, "memory")
		data = append(data, []byte("99 1 0:99 / "+point+" rw - cgroup cgroup rw,memory\n")...)
		f.write(f.mountinfo, string(data))
		checkBad(t, point+"/tend", f.mountinfo, "is in a cgroup v1 hierarchy (memory, mounted at "+point+")")
		return
	}
	dir := filepath.Join(point, "tend-test-v1")
	checkBad(t, dir, "/proc/self/mountinfo", dir+" is in a cgroup v1 hierarchy (")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(dir)
		t.Errorf("a v1 group was made: %v", err)
	}
}

// A read-only bind mount of a real cgroup2 directory: neither an existing
// directory nor a new one below it is writable.
func TestBadNotWritable(t *testing.T) {
	src := filepath.Join(cgroup2Base(t), "tend-test-ro-"+filepath.Base(t.TempDir()))
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Rmdir(src) })
	mnt := t.TempDir()
	if err := unix.Mount(src, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("remount read-only: %v", err)
	}
	checkBad(t, mnt, "/proc/self/mountinfo", mnt+" is not writable: read-only file system")
}

// A DIR that does not exist is refused, not made: tend makes its own
// subtree in DIR, never DIR, so that it never has DIR to remove.
func TestBadMissing(t *testing.T) {
	dir := filepath.Join(testDir(t), "missing")
	checkBad(t, dir, "/proc/self/mountinfo", dir+" does not exist: tend makes its own group inside this directory (tend-x), not the directory itself")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing directory was made: %v", err)
	}
}

// A file in a cgroup2 mount that is not a group (an interface file).
func TestBadNotADirectory(t *testing.T) {
	file := filepath.Join(testDir(t), "cgroup.procs")
	checkBad(t, file, "/proc/self/mountinfo", file+" is not a directory")
}
