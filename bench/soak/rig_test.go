//go:build soak

package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// The fleet: 200 instances in all.
const (
	nSleepers  = 120
	nChatty    = 40
	nNotifiers = 30
	nCrashers  = 10
	nSteady    = nSleepers + nChatty + nNotifiers // all but the crashers: running once warm
)

// fleetConfig is tend.toml for the fleet; exe is this test binary (the
// notifiers' program). Every program backs off briefly so the kill storm
// keeps most of the fleet running rather than waiting out long backoffs.
func fleetConfig(exe string) string {
	return fmt.Sprintf(`[daemon]
state_dir = "state"

[defaults]
backoff_initial = "100ms"
backoff_max = "1s"
stop_grace = "5s"

[program.sleepers]
command = ["sleep", "100000"]
instances = %d

[program.chatty]
shell = "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done"
instances = %d

[program.notifiers]
command = [%s]
env = { %s = "notifier" }
instances = %d
ready = "notify"
watchdog = "5s"

[program.crashers]
shell = "sleep 0.$(($$ %% 10)); exit 1"
instances = %d
`, nSleepers, nChatty, strconv.Quote(exe), helperEnv, nNotifiers, nCrashers)
}

// rig is one soak run's directory, daemon and children.
type rig struct {
	t      *testing.T
	dir    string
	conf   string
	tend   string // a symlink named tend to this test binary
	client *client.Client

	// mu guards own, and is held across every fork of this process and
	// across reaping, so that a zombie not in own is never one that an
	// exec.Cmd is about to wait for.
	mu  sync.Mutex
	own map[int]bool // children started with exec.Cmd and not yet waited; guarded by mu

	hold   atomic.Bool  // while set, zombies are left for the next daemon to adopt
	strays atomic.Int64 // children this process reaped: runs and grandchildren orphaned by a killed daemon
}

// daemonProc is one `tend up`.
type daemonProc struct {
	n    int // 1 for the first daemon, 2 for its replacement
	pid  int
	log  string        // its stderr
	done chan struct{} // closed once it has been reaped
}

func newRig(t *testing.T) *rig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tend-soak-")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, conf: filepath.Join(dir, "tend.toml"), tend: filepath.Join(dir, "tend"), own: map[int]bool{}}
	r.client = client.New(filepath.Join(dir, "state", "tend.sock"))
	if err := os.Symlink(exe, r.tend); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.conf, []byte(fleetConfig(exe)), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs cmd as a child of this process, recorded in own until waited.
func (r *rig) start(cmd *exec.Cmd) (wait func() error, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	r.own[pid] = true
	return func() error {
		err := cmd.Wait()
		r.mu.Lock()
		delete(r.own, pid)
		r.mu.Unlock()
		return err
	}, nil
}

// startDaemon runs `tend up` in its own process group, its stderr (the
// event lines) in up-N.log.
func (r *rig) startDaemon(n int) *daemonProc {
	r.t.Helper()
	d := &daemonProc{n: n, log: filepath.Join(r.dir, fmt.Sprintf("up-%d.log", n)), done: make(chan struct{})}
	logf, err := os.Create(d.log)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(r.tend, "up", "-c", r.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	wait, err := r.start(cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	d.pid = cmd.Process.Pid
	go func() {
		_ = wait()
		close(d.done)
	}()
	return d
}

// stopDaemon is the cleanup of a daemon still running when the test ends
// early: SIGTERM (it stops the fleet), then SIGKILL.
func (r *rig) stopDaemon(d *daemonProc) {
	select {
	case <-d.done:
		return
	default:
	}
	_ = syscall.Kill(d.pid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
		<-d.done
	}
}

// tendCmd runs the tend CLI and returns its output.
func (r *rig) tendCmd(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(r.tend, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	wait, err := r.start(cmd)
	if err != nil {
		return "", err
	}
	err = wait()
	return out.String(), err
}

// reapStrays reaps the zombies among this process's children that no
// exec.Cmd waits for: runs of a killed daemon, which became this process's
// children (it is a subreaper), and their orphaned grandchildren. Each is
// reaped by its own pid, never with wait4(-1), which could take the status
// a daemon's exec.Cmd.Wait is waiting for.
func (r *rig) reapStrays() {
	if r.hold.Load() {
		return
	}
	self := os.Getpid()
	procs := allProcs()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range procs {
		if p.ppid != self || p.state != 'Z' || r.own[p.pid] {
			continue
		}
		var ws syscall.WaitStatus
		if got, _ := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil); got == p.pid {
			r.strays.Add(1)
		}
	}
}

// reapLoop runs reapStrays every second until ctx ends.
func (r *rig) reapLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.reapStrays()
		}
	}
}

// killLeftovers is the last cleanup: every descendant of this process
// still there gets SIGKILL and is reaped.
func (r *rig) killLeftovers() {
	r.hold.Store(false)
	for range 50 {
		left := descendants(os.Getpid(), allProcs())
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			if p.state != 'Z' {
				killDescendant(p)
			}
		}
		time.Sleep(100 * time.Millisecond)
		r.reapStrays()
	}
}

// waitFor polls cond every 100 ms until it holds or timeout passes. The
// bounds are generous: other tests share this machine's two cores.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// steadyRunning reports whether every instance but the crashers is running.
func (r *rig) steadyRunning() bool {
	list, err := r.client.List(false)
	if err != nil {
		return false
	}
	n := 0
	for _, st := range list {
		if st.Program != "crashers" && st.State == program.StateRunning && st.PID != nil {
			n++
		}
	}
	return n == nSteady
}

// readAudit reads every event of the audit log from its files, oldest
// first: the way to see the log while no daemon runs.
func (r *rig) readAudit() ([]program.Event, error) {
	audit, err := statedir.Open(filepath.Join(r.dir, "state", "audit"))
	if err != nil {
		return nil, err
	}
	defer audit.Close()
	files, err := events.ListFiles(audit) // every part of each day, in order
	if err != nil {
		return nil, err
	}
	var out []program.Event
	for _, af := range files {
		name := af.Name
		f, err := audit.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e program.Event
			if err := e.UnmarshalJSON(sc.Bytes()); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w: %q", name, err, sc.Text())
			}
			out = append(out, e)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
