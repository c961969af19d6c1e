package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestDaemonKilledOutrightIsReplacedWithoutDuplicates kills tend up with
// SIGKILL and starts it again on the same state dir: the fleet keeps running,
// the new daemon adopts every run (same pids, no second copy), their output
// keeps reaching the log, a run of a program no longer configured is
// stopped, and tend down then leaves nothing behind.
func TestDaemonKilledOutrightIsReplacedWithoutDuplicates(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	// Runs orphaned by the killed daemon come to this process, which reaps
	// them once tend down ends them (wait4 on their pids only).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	conf := filepath.Join(dir, "tend.toml")
	fleet := `[program.counter]
shell = "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.05; done"
[program.pool]
command = ["sleep", "1000"]
instances = 2
`
	write(t, conf, fleet+"[program.gone]\ncommand = [\"sleep\", \"1001\"]\n")
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))

	up := startUp(t, tend, conf)
	waitRunning(t, c, "counter:0", "pool:0", "pool:1", "gone:0")
	before := pids(t, c, "counter:0", "pool:0", "pool:1", "gone:0")
	syscall.Kill(up.Process.Pid, syscall.SIGKILL)
	up.Wait()
	for id, pid := range before {
		if !testutil.Alive(pid) {
			t.Fatalf("%s (pid %d) died with the daemon", id, pid)
		}
		orphaned(t, pid)
	}

	write(t, conf, fleet) // "gone" is no longer configured
	up = startUp(t, tend, conf)
	waitRunning(t, c, "counter:0", "pool:0", "pool:1")
	after := pids(t, c, "counter:0", "pool:0", "pool:1")
	for id, pid := range after {
		if before[id] != pid {
			t.Errorf("%s: pid %d before, %d after: not adopted", id, before[id], pid)
		}
	}
	testutil.Eventually(t, "the unconfigured run to be stopped", func() bool { return !testutil.Alive(before["gone:0"]) })
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	adopted := false
	for _, e := range evs {
		if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseAdopted && d.Count != nil && *d.Count == 3 {
			adopted = true
		}
		if e.Kind == program.KindSpawned && e.Seq > 0 && strings.HasPrefix(e.ID, "pool") && e.Data.(*program.Spawned).Run > 1 {
			t.Errorf("a pool instance was spawned again: %+v", e)
		}
	}
	if !adopted {
		t.Error("no daemon adopted event with count 3")
	}

	// Output keeps flowing into the log through the reopened FIFO.
	log := filepath.Join(dir, ".tend", "logs", "counter-0.log")
	n := lastLine(t, log)
	testutil.Eventually(t, "the adopted run's output to keep arriving", func() bool { return lastLine(t, log) > n+10 })

	// An adopted run's exit is noticed through its pidfd; its status went to
	// another parent, so it counts as unknown.
	syscall.Kill(after["counter:0"], syscall.SIGKILL)
	testutil.Eventually(t, "the adopted run's exit", func() bool {
		st, err := c.Status("counter:0")
		return err == nil && st.LastExit != nil
	})
	if st, _ := c.Status("counter:0"); st.LastExit.LikelyCause != program.CauseUnknown || st.LastExit.Code != nil {
		t.Errorf("adopted run's exit: %+v", st.LastExit)
	}

	downAndGone(t, c, up, after)
}

func tendBinary(t *testing.T) string { return helperBinary(t, "tend") }

func startUp(t *testing.T, tend, conf string) *exec.Cmd { return startUpWith(t, tend, conf, nil) }

// startUpWith starts tend up -c conf in a process group of its own, setup
// (when not nil) first changing the command (its stderr, its extra
// files); the test's end stops a daemon still running.
func startUpWith(t *testing.T, tend, conf string, setup func(*exec.Cmd)) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(tend, "up", "-c", conf)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			cmd.Wait()
		}
	})
	return cmd
}

func waitRunning(t *testing.T, c *client.Client, ids ...string) {
	t.Helper()
	for _, id := range ids {
		testutil.Eventually(t, id+" running", func() bool {
			st, err := c.Status(id)
			return err == nil && st.State == program.StateRunning
		})
	}
}

func pids(t *testing.T, c *client.Client, ids ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range ids {
		st, err := c.Status(id)
		if err != nil || st.PID == nil {
			t.Fatalf("%s: %+v %v", id, st, err)
		}
		out[id] = *st.PID
	}
	return out
}

// orphaned takes pid, a run of a daemon killed outright that was
// reparented to this process (a subreaper), and reaps it when the test
// ends: by its pid only, never wait4(-1), which could take the status of a
// daemon this test still waits for; after a SIGKILL should it still run (a
// test that failed before a daemon ended it). Until reaped the pid cannot
// be reused, so the signal never reaches another process.
func orphaned(t *testing.T, pid int) {
	t.Cleanup(func() {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil || got == pid {
			return // not this process's child, or reaped now
		}
		syscall.Kill(pid, syscall.SIGKILL)
		syscall.Wait4(pid, &ws, 0, nil)
	})
}

// downAndGone shuts the daemon down (tend down) and waits until every run
// of runs is gone.
func downAndGone(t *testing.T, c *client.Client, up *exec.Cmd, runs map[string]int) {
	t.Helper()
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	for id, pid := range runs {
		testutil.Eventually(t, id+" to be gone", func() bool { return !testutil.Alive(pid) })
	}
}

func lastLine(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, text, _ := strings.Cut(sc.Text(), " | ") // after the record's time and stream
		if v, ok := strings.CutPrefix(text, "line "); ok {
			if k, err := strconv.Atoi(v); err == nil {
				n = k
			}
		}
	}
	return n
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
