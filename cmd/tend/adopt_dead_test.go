package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A run that died while no daemon watched it (killed between the daemon's
// SIGKILL and the next tend up) is not adopted as running: the next daemon
// counts its end, and a remove_on_exit program of it is removed. Its dead
// run is left unreaped (a zombie of this process, the subreaper) while the
// next daemon starts, the case where /proc still shows it as the recorded
// process; and reaped, the case where its pid is gone.
func TestARunDeadBeforeTheNextDaemonIsNotAdoptedAsRunning(t *testing.T) {
	for _, reap := range []bool{false, true} {
		t.Run("reaped="+strconv.FormatBool(reap), func(t *testing.T) {
			dir := t.TempDir()
			tend := tendBinary(t)
			becomeSubreaper(t)
			conf := filepath.Join(dir, "tend.toml")
			write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n")
			c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
			up := startUp(t, tend, conf)
			waitRunning(t, c, "base:0")
			ctx := context.Background()
			if _, err := c.AddProgram(ctx, map[string]any{"name": "sess", "command": []string{"sleep", "1000"}, "remove_on_exit": true}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.AddProgram(ctx, map[string]any{"name": "keep", "command": []string{"sleep", "1000"}, "restart": "never"}); err != nil {
				t.Fatal(err)
			}
			waitRunning(t, c, "sess:0", "keep:0")
			before := pids(t, c, "base:0", "sess:0", "keep:0")
			killUp(t, up, up.Process.Pid, before)
			for _, id := range []string{"sess:0", "keep:0"} {
				syscall.Kill(before[id], syscall.SIGKILL)
				if reap {
					var ws syscall.WaitStatus
					syscall.Wait4(before[id], &ws, 0, nil)
				} else {
					testutil.Eventually(t, id+" to be a zombie", func() bool { return !testutil.Alive(before[id]) })
				}
			}

			up = startUp(t, tend, conf)
			waitRunning(t, c, "base:0")
			testutil.Eventually(t, "sess (remove_on_exit) to be removed", func() bool {
				_, err := c.Status("sess:0")
				return err != nil
			}, testutil.Within(30*time.Second), testutil.Explain(eventsOf(c)))
			var st program.Status
			testutil.Eventually(t, "keep:0 to have exited", func() bool {
				var err error
				st, err = c.Status("keep:0")
				return err == nil && st.State == program.StateExited && st.PID == nil
			}, testutil.Within(30*time.Second), testutil.Explain(func() string { return eventsOf(c)() + "\nstatus: " + st.State }))
			downAndGone(t, c, up, map[string]int{"base:0": before["base:0"]})
		})
	}
}

// Runs that end while the next daemon starts and adopts them, each at its
// own moment: none is left running with no pid, every remove_on_exit
// program of them is removed, and every other one has exited.
func TestRunsEndingDuringAdoption(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n")
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "base:0")
	g := newGates(t)
	const n = 60
	ctx := context.Background()
	var ids []string
	for i := range n {
		name := "r" + strconv.Itoa(i)
		body := map[string]any{"name": name, "restart": "never",
			"shell": "while [ ! -e " + filepath.Join(string(g), "go") + " ]; do sleep 0.01; done; sleep 0." + strconv.Itoa(i/10) + strconv.Itoa(i%10)}
		if i%2 == 0 {
			body["remove_on_exit"] = true
		}
		if _, err := c.AddProgram(ctx, body); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, name+":0")
	}
	waitRunning(t, c, ids...)
	before := pids(t, c, append([]string{"base:0"}, ids...)...)
	killUp(t, up, up.Process.Pid, before)
	for _, id := range ids { // reaped as they end, as init would
		go func() {
			var ws syscall.WaitStatus
			syscall.Wait4(before[id], &ws, 0, nil)
		}()
	}
	g.open(t, "go")
	up = startUp(t, tend, conf)
	testutil.Eventually(t, "every run to have ended and each program to be where it should", func() bool {
		list, err := c.List(false)
		if err != nil {
			return false
		}
		left := 0
		for _, st := range list {
			switch {
			case st.Program == "base":
			case st.Program[1:] != "" && st.PID == nil && st.State == program.StateExited && odd(st.Program):
			default:
				left++
			}
		}
		return left == 0 && len(list) == 1+n/2
	}, testutil.Within(60*time.Second), testutil.Explain(func() string {
		list, _ := c.List(false)
		var b []byte
		for _, st := range list {
			pid := 0
			if st.PID != nil {
				pid = *st.PID
			}
			b = append(b, (st.ID + " " + st.State + " pid " + strconv.Itoa(pid) + "\n")...)
		}
		return string(b)
	}))
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == program.KindSpawned && e.Program != "base" && e.Data.(*program.Spawned).Run > 1 {
			t.Errorf("%s started again (run %d)", e.ID, e.Data.(*program.Spawned).Run)
		}
	}
	downAndGone(t, c, up, map[string]int{"base:0": before["base:0"]})
}

// odd says the program rN has an odd N (not remove_on_exit).
func odd(name string) bool {
	k, err := strconv.Atoi(name[1:])
	return err == nil && k%2 == 1
}

// With cgroups, what a run that died while no daemon watched left in its
// group (a child of its killed leader) is killed by the next daemon, as at
// any run's end, before the run counts as exited.
func TestARunDeadBeforeTheNextDaemonLeavesNothingInItsGroup(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	child := filepath.Join(dir, "child.pid")
	write(t, conf, "[program.family]\nrestart = \"never\"\nshell = \"sleep 1000 & echo $! > "+child+"; wait\"\n")
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "family:0")
	if !trackedByCgroup(t, c) {
		t.Skip("runs are not in cgroups here")
	}
	var straggler int
	testutil.Eventually(t, "the run's child to start", func() bool {
		b, err := os.ReadFile(child)
		straggler, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && straggler > 0
	})
	before := pids(t, c, "family:0")
	killUp(t, up, up.Process.Pid, before)
	orphaned(t, straggler)
	syscall.Kill(before["family:0"], syscall.SIGKILL)
	var ws syscall.WaitStatus
	syscall.Wait4(before["family:0"], &ws, 0, nil)
	if !testutil.Alive(straggler) {
		t.Fatal("the run's child died with its leader")
	}

	up = startUp(t, tend, conf)
	testutil.Eventually(t, "family:0 to have exited", func() bool {
		st, err := c.Status("family:0")
		return err == nil && st.State == program.StateExited && st.PID == nil
	}, testutil.Within(30*time.Second), testutil.Explain(eventsOf(c)))
	testutil.Eventually(t, "the run's child to be killed", func() bool { return !testutil.Alive(straggler) })
	downAndGone(t, c, up, nil)
}

// trackedByCgroup says whether the daemon's started event says cgroup.
func trackedByCgroup(t *testing.T, c *client.Client) bool {
	t.Helper()
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseStarted {
			return d.Tracking == program.TrackingCgroup
		}
	}
	return false
}
