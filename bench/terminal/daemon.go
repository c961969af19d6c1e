package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// daemon is one `tend up` this process started, in a process group of its
// own, with its config and state directory in dir.
type daemon struct {
	bin, dir, conf string
	up             *exec.Cmd
	exited         chan struct{} // closed once up has been waited for
	c              *client.Client
	t0             time.Time // when up was exec'd
}

// startDaemon writes cfg as dir/tend.toml and runs tend up on it.
func startDaemon(bin, dir, cfg string) (*daemon, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	d := &daemon{bin: bin, dir: dir, conf: filepath.Join(dir, "tend.toml"), exited: make(chan struct{})}
	if err := os.WriteFile(d.conf, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own copy
	d.up = exec.Command(bin, "up", "-c", d.conf)
	d.up.Stdout, d.up.Stderr = log, log
	d.up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.t0 = time.Now()
	if err := d.up.Start(); err != nil {
		return nil, err
	}
	go func() { d.up.Wait(); close(d.exited) }()
	d.c = client.New(d.socket())
	return d, nil
}

func (d *daemon) pid() int          { return d.up.Process.Pid }
func (d *daemon) stateDir() string  { return filepath.Join(d.dir, ".tend") }
func (d *daemon) socket() string    { return filepath.Join(d.stateDir(), "tend.sock") }
func (d *daemon) keeper() (pid int) { return keeperOf(d.stateDir()) }

// waitRunning waits until n instances run and returns their ids and how
// the daemon tracks them (cgroup or group).
func (d *daemon) waitRunning(ctx context.Context, n int, limit time.Duration) ([]string, string, error) {
	for {
		sts, err := d.c.List(false)
		var ids []string
		tracking := ""
		for _, st := range sts {
			if st.State == program.StateRunning {
				ids = append(ids, st.ID)
				tracking = st.Tracking
			}
		}
		if err == nil && len(ids) == n {
			return ids, tracking, nil
		}
		select {
		case <-d.exited:
			return nil, "", fmt.Errorf("tend up exited (%v): see %s", d.up.ProcessState, filepath.Join(d.dir, "tend-up.log"))
		default:
		}
		if time.Since(d.t0) > limit {
			return nil, "", fmt.Errorf("%d of %d running after %v (%v)", len(ids), n, limit, err)
		}
		if err := measure.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, "", err
		}
	}
}

// down runs tend down and waits for the daemon to exit; it returns the
// time that took.
func (d *daemon) down() (time.Duration, error) {
	t := time.Now()
	if out, err := exec.Command(d.bin, "down", "-c", d.conf).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("tend down: %v: %s", err, out)
	}
	select {
	case <-d.exited:
	case <-time.After(2 * time.Minute):
		return 0, errors.New("the daemon did not exit after tend down")
	}
	return time.Since(t), nil
}

// kill SIGKILLs the daemon's process group if the daemon still runs, and
// waits for it.
func (d *daemon) kill() {
	select {
	case <-d.exited:
	default:
		_ = syscall.Kill(-d.pid(), syscall.SIGKILL)
		<-d.exited
	}
}

// killOrphans waits up to two seconds for every child of this process
// (instances or a keeper a daemon left, which this subreaper adopted) to
// exit, then SIGKILLs and reaps them all; it says how many were still
// alive. It runs when no other child of this process is alive: a daemon, a
// tmux server or a client still running would be counted, and killed.
func killOrphans() int {
	var alive []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		alive = slices.DeleteFunc(measure.Children(), func(pid int) bool { return procState(pid) == 'Z' })
		if len(alive) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pid := range measure.Children() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
	return len(alive)
}
