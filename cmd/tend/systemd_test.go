package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestTheShippedUnitUnderARealSystemd (issue 19): deploy/systemd/tend.service
// run by a real systemd, this machine's /lib/systemd/systemd booted as PID 1
// of new PID, mount, cgroup, UTS, IPC and network namespaces, its cgroup
// tree a fresh directory of this machine's cgroup2 hierarchy. What the unit
// promises, each checked on the live fleet:
//
//   - tend SIGKILLed: systemd starts it again (Restart=on-failure) and the new
//     tend adopts every run, none restarted (KillMode=process);
//   - tend wedged (SIGSTOP): the watchdog ends it, and the same;
//   - systemctl reload: tend reload, a new program starts, the rest run on;
//   - systemctl stop: tend's own shutdown, no process of any run left, the
//     unit inactive, not failed, and the scope tend had systemd make for its
//     runs' groups (tend-ID.scope, beside the unit) gone.
//
// The unit is the shipped file with the paths of this test, plus a drop-in
// that keeps systemd's default dependencies (journald, udev, ...) out of a
// namespace that shares this machine's devices and a watchdog of 2 s
// instead of 30 s.
func TestTheShippedUnitUnderARealSystemd(t *testing.T) {
	sd := bootSystemd(t)
	tend := tendBinary(t)
	conf := filepath.Join(sd.work, "tend.toml")
	write(t, conf, `[program.sleeper]
command = ["sleep", "100061"]
instances = 2

[program.leaker]
shell = "setsid sleep 100062 & exec sleep 100063"
`)
	sd.install(t, tend, conf)
	sd.systemctl(t, "start", "tend")
	c := client.New(filepath.Join(sd.work, ".tend", "tend.sock"))
	ids := []string{"sleeper:0", "sleeper:1", "leaker:0"}
	waitRunning(t, c, ids...)
	runs := pids(t, c, ids...) // as systemd's namespace numbers them
	// The same processes as this one numbers them, from their groups: the
	// leaker's with its setsid'd sleep.
	var procs []int
	testutil.Eventually(t, "every run's processes in their groups", func() bool {
		procs = nil
		for _, g := range []string{"sleeper-0", "sleeper-1", "leaker-0"} {
			procs = append(procs, groupProcs(filepath.Join(sd.unitGroup(t), g))...)
		}
		return len(procs) == 4
	})

	same := func(when string) {
		t.Helper()
		waitRunning(t, c, ids...)
		for id, pid := range runs {
			st, err := c.Status(id)
			if err != nil || st.PID == nil || *st.PID != pid || st.Run != 1 {
				t.Errorf("%s: %s is %+v (%v), want still run 1, pid %d", when, id, st, err, pid)
			}
		}
		for _, pid := range procs {
			if !testutil.Alive(pid) {
				t.Errorf("%s: pid %d (%s) of a run is gone", when, pid, cmdline(pid))
			}
		}
	}

	main := sd.mainPID(t)
	syscall.Kill(main, syscall.SIGKILL)
	next := sd.nextMain(t, main)
	same("after tend was SIGKILLed")

	syscall.Kill(next, syscall.SIGSTOP) // wedged: no more WATCHDOG=1
	sd.nextMain(t, next)
	same("after the watchdog ended a wedged tend")

	write(t, conf, strings.Replace(readFile(t, conf), "[program.leaker]", "[program.added]\ncommand = [\"sleep\", \"100064\"]\n\n[program.leaker]", 1))
	sd.systemctl(t, "reload", "tend")
	waitRunning(t, c, "added:0")
	same("after systemctl reload")
	procs = append(procs, groupProcs(filepath.Join(sd.unitGroup(t), "added-0"))...)

	sd.systemctl(t, "stop", "tend")
	for _, pid := range procs {
		if testutil.Alive(pid) {
			t.Errorf("pid %d (%s) of a run outlived systemctl stop", pid, cmdline(pid))
		}
	}
	if out, _ := sd.run("systemctl", "is-active", "tend"); strings.TrimSpace(out) != "inactive" {
		t.Errorf("after systemctl stop the unit is %q, want inactive", strings.TrimSpace(out))
	}
	testutil.Eventually(t, "the runs' scope gone", func() bool {
		ms, _ := filepath.Glob(filepath.Join(sd.cg, "system.slice", "tend-*.scope"))
		return len(ms) == 0
	})
}

// systemd is a systemd booted in namespaces of its own for one test.
type systemd struct {
	work  string // the test's directory: units, config, state, logs
	cg    string // the cgroup2 directory that is the namespace's cgroup root
	init  int    // systemd's pid, as this process sees it
	units string // the directory bound over the namespace's /etc/systemd/system
}

// bootSystemd boots systemd, with no unit but its own, and stops it, and
// with it every process of its namespace, when the test ends. It skips the
// test where that cannot be done.
func bootSystemd(t *testing.T) *systemd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("booting systemd in namespaces needs root")
	}
	for _, bin := range []string{"/lib/systemd/systemd", "/bin/systemctl"} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("no systemd here: %v", err)
		}
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Missing(t, "%s not installed: %v", tool, err)
		}
	}
	sd := &systemd{work: t.TempDir(), cg: testutil.CgroupDir(t)}
	sd.units = filepath.Join(sd.work, "units")
	if err := os.MkdirAll(filepath.Join(sd.units, "tend.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(sd.work, "console") // systemd's own messages, never this machine's console
	write(t, console, "")
	boot := filepath.Join(sd.work, "boot.sh")
	write(t, boot, fmt.Sprintf(`set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mount -t cgroup2 none /sys/fs/cgroup
mount --bind %[1]s /etc/systemd/system
mount --bind %[2]s /dev/console
exec env container=tend-test /lib/systemd/systemd --system --unit=tend-test.target --log-target=console --show-status=false
`, sd.units, console))
	// A target of nothing: systemd starts no unit of this machine's.
	write(t, filepath.Join(sd.units, "tend-test.target"), "[Unit]\nDescription=nothing\nDefaultDependencies=no\n")
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec unshare --pid --fork --mount-proc --cgroup --uts --ipc --net sh %s`, sd.cg, boot))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sd.init != 0 {
			syscall.Kill(sd.init, syscall.SIGKILL) // the namespace's init: every process in it goes
		}
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("systemd's console:\n%s\nunshare: %s", readFile(t, console), out.String())
		}
	})
	testutil.Eventually(t, "systemd to boot", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		sd.init, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if sd.init == 0 {
			return false
		}
		_, err := sd.run("systemctl", "show", "--property=Version")
		return err == nil
	}, testutil.Explain(func() string { return readFile(t, console) + out.String() }))
	return sd
}

// install puts the shipped unit, with tend and conf for its paths, and the
// test's drop-in in the namespace, and has systemd load them.
func (sd *systemd) install(t *testing.T, tend, conf string) {
	t.Helper()
	unit := readFile(t, "../../deploy/systemd/tend.service")
	unit = strings.ReplaceAll(unit, "/usr/local/bin/tend", tend)
	unit = strings.ReplaceAll(unit, "/etc/tend/tend.toml", conf)
	write(t, filepath.Join(sd.units, "tend.service"), unit)
	log := filepath.Join(sd.work, "tend.log")
	write(t, filepath.Join(sd.units, "tend.service.d", "test.conf"), fmt.Sprintf(`[Unit]
DefaultDependencies=no
[Service]
StandardOutput=append:%[1]s
StandardError=append:%[1]s
Environment=GORACE=atexit_sleep_ms=10
WatchdogSec=2s
TimeoutAbortSec=2s
`, log))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tend's output under systemd:\n%s", readFile(t, log))
		}
	})
	sd.systemctl(t, "daemon-reload")
}

// run runs a command in systemd's namespaces.
func (sd *systemd) run(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(sd.init), "-m", "-p", "--"}, args...)...).CombinedOutput()
	return string(out), err
}

func (sd *systemd) systemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := sd.run(append([]string{"systemctl"}, args...)...); err != nil {
		status, _ := sd.run("systemctl", "status", "--no-pager", "tend")
		t.Fatalf("systemctl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, status)
	}
}

// unitGroup is the cgroup tend's runs are in: tend-ID in the scope
// tend-ID.scope that tend has systemd make for them beside its unit.
func (sd *systemd) unitGroup(t *testing.T) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(sd.cg, "system.slice", "tend-*.scope", "tend-*"))
	if len(ms) != 1 {
		t.Fatalf("system.slice holds %v, want one tend-ID.scope/tend-ID", ms)
	}
	return ms[0]
}

// mainPID is tend's pid as this process sees it: the one process in the
// unit's own cgroup (its runs are in groups below).
func (sd *systemd) mainPID(t *testing.T) int {
	t.Helper()
	var p []int
	testutil.Eventually(t, "tend alone in its unit's cgroup", func() bool {
		p = groupProcs(filepath.Join(sd.cg, "system.slice", "tend.service"))
		return len(p) == 1 && strings.Contains(cmdline(p[0]), " up -c ")
	}, testutil.Explain(func() string { return fmt.Sprint(p) }))
	return p[0]
}

// nextMain waits for systemd to have started a tend other than old, and
// for old to be gone.
func (sd *systemd) nextMain(t *testing.T, old int) int {
	t.Helper()
	var p []int
	testutil.Eventually(t, "systemd to start tend again", func() bool {
		p = groupProcs(filepath.Join(sd.cg, "system.slice", "tend.service"))
		return len(p) == 1 && p[0] != old && !testutil.Alive(old)
	}, testutil.Within(time.Minute), testutil.Explain(func() string { return fmt.Sprint(p) }))
	return p[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
