package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// upExits runs tend up, which must exit by itself, and returns its exit
// status and stderr.
func upExits(t *testing.T, tend, conf string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tend, "up", "-c", conf)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	// A daemon that started after all is stopped, runs and all.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tend up did not exit:\n%s", stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, stderr.String()
}

// plant makes a file outside the state dir and a symlink to it inside.
func plant(t *testing.T, link string) (target string) {
	t.Helper()
	target = filepath.Join(t.TempDir(), "precious")
	write(t, target, "precious content that must stay\n")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return target
}

func untouched(t *testing.T, target string) {
	t.Helper()
	if b, _ := os.ReadFile(target); string(b) != "precious content that must stay\n" {
		t.Errorf("written through the symlink: %q", b)
	}
}

// TestSymlinksInTheStateDirAreNeverFollowed: tend.lock, the audit file and
// the token planted as symlinks to a file elsewhere: tend up refuses with
// exit 2 and writes nothing through them; runs.json as one is set aside
// and replaced, its target untouched.
func TestSymlinksInTheStateDirAreNeverFollowed(t *testing.T) {
	tend := tendBinary(t)
	for _, tc := range []struct {
		name, file, daemon string
		oneLine            bool
	}{
		{"lock", "tend.lock", "", true},
		{"audit file", "audit/events-" + time.Now().UTC().Format("2006-01-02") + ".jsonl", "", true},
		{"token", "token", "[daemon]\nhttp = \"127.0.0.1:0\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "tend.toml")
			write(t, conf, tc.daemon+"[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
			target := plant(t, filepath.Join(dir, ".tend", tc.file))
			code, stderr := upExits(t, tend, conf)
			if code != 2 || !strings.Contains(stderr, "symlink") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
			if tc.oneLine && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("more than one line:\n%s", stderr)
			}
			untouched(t, target)
			if tree := autoTree(filepath.Join(dir, ".tend")); tree != "" {
				if _, err := os.Stat(tree); err == nil {
					t.Errorf("the refused start left its cgroup tree %s", tree)
				}
			}
		})
	}

	t.Run("runs.json", func(t *testing.T) {
		dir := t.TempDir()
		conf := filepath.Join(dir, "tend.toml")
		write(t, conf, "[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
		target := plant(t, filepath.Join(dir, ".tend", "runs.json"))
		plant(t, filepath.Join(dir, ".tend", "runs.json.log"))
		c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
		up := startUp(t, tend, conf)
		waitRunning(t, c, "w:0")
		if err := c.Shutdown(); err != nil {
			t.Fatal(err)
		}
		up.Wait()
		untouched(t, target)
		if fi, err := os.Lstat(filepath.Join(dir, ".tend", "runs.json")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("runs.json after the daemon: %v %v", fi, err)
		}
		if aside, _ := filepath.Glob(filepath.Join(dir, ".tend", "runs.json.corrupt-*")); len(aside) != 1 {
			t.Errorf("set aside: %v", aside)
		}
	})
}

// TestAStateDirOthersControlIsRefused: a state directory of another user,
// or one its group may write, is refused with exit 2 and one line.
func TestAStateDirOthersControlIsRefused(t *testing.T) {
	tend := tendBinary(t)
	for _, tc := range []struct {
		name string
		set  func(dir string) error
		want string
	}{
		{"group-writable", func(dir string) error { return os.Chmod(dir, 0o770) }, "writable by group or others"},
		{"foreign-owned", func(dir string) error { return os.Chown(dir, 65534, 65534) }, "belongs to uid 65534"},
		{"symlinked", func(dir string) error {
			real := dir + ".real"
			if err := os.Rename(dir, real); err != nil {
				return err
			}
			return os.Symlink(real, dir)
		}, "is a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "foreign-owned" && os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			dir := t.TempDir()
			conf := filepath.Join(dir, "tend.toml")
			write(t, conf, "[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
			state := filepath.Join(dir, ".tend")
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.set(state); err != nil {
				t.Fatal(err)
			}
			code, stderr := upExits(t, tend, conf)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
			if _, err := os.Lstat(filepath.Join(state, "tend.lock")); err == nil {
				t.Error("tend.lock was made in the refused directory")
			}
		})
	}
}

// TestAnInheritedDescriptorDoesNotReachARun: tend up started with an open
// fd 3 (a wrapper's, say): no run has it.
func TestAnInheritedDescriptorDoesNotReachARun(t *testing.T) {
	tend := tendBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
	secret := filepath.Join(dir, "inherited")
	f, err := os.Create(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := startUpWith(t, tend, conf, func(cmd *exec.Cmd) {
		cmd.ExtraFiles = []*os.File{f} // fd 3, not close-on-exec in tend
	})
	if target, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/3"); target != secret {
		t.Logf("tend's fd 3: %q", target) // the daemon may have moved on already
	}
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	waitRunning(t, c, "w:0")
	pid := pids(t, c, "w:0")["w:0"]
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); target == secret {
			t.Errorf("the run (pid %d) has the inherited file as fd %s", pid, fd.Name())
		}
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// autoTree is the cgroup tree a daemon with `cgroup = "auto"` makes for
// stateDir below this test's own group (docs/containment.md), or "" without cgroup2.
func autoTree(stateDir string) string {
	mount, own := testutil.Cgroup2Mount(), cgroupOf(os.Getpid())
	if mount == "" || own == "" {
		return ""
	}
	return filepath.Join(mount, own, "tend-"+statedir.ID(stateDir))
}

// TestTrustAStateDirUnderAnotherUsersDirectoryIsRefused: state_dir =
// "/srv/shared/.tend" with /srv/shared another user's. That user could
// rename .tend away and put their own (a fake keeper's socket in it) in
// its place, so tend up exits 2 with one line naming /srv/shared, and
// makes nothing there. One under a sticky, world-writable directory (as
// /tmp) whose own parent is tend's starts.
func TestTrustAStateDirUnderAnotherUsersDirectoryIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: another user's directory is made with chown")
	}
	tend := tendBinary(t)
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[daemon]\nstate_dir = \""+filepath.Join(shared, ".tend")+"\"\n[program.w]\ncommand = [\"sleep\", \"1000\"]\n")
	code, stderr := upExits(t, tend, conf)
	if code != 2 || !strings.Contains(stderr, shared+", a parent of state_dir") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Lstat(filepath.Join(shared, ".tend")); err == nil {
		t.Error("the state dir was made under the other user's directory")
	}
}
