package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
)

// acquireLock takes an exclusive flock on the state dir's tend.lock and
// writes our pid into it. The kernel drops the lock when the process dies,
// so a crashed daemon never leaves a stale lock behind. A tend.lock that is
// a symlink (or not a regular file) is refused, never followed.
func acquireLock(dir *statedir.Dir) (*os.File, error) {
	f, err := dir.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if u := statedir.Unsafe(err); u != err {
			return nil, u
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b[:n]))
			return nil, fmt.Errorf("%w for %s (pid %s); stop it with tend down, or use another state_dir", ErrAlreadyRunning, dir.Path(), pid)
		}
		return nil, fmt.Errorf("lock %s: %w", dir.Join(lockName), err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// killStragglers ends processes that left their instance's group and were
// reparented to us as subreaper (double-forked daemons of an instance): once
// every instance has stopped, any child of ours is one of those. SIGTERM,
// a short grace, then SIGKILL; the reaper collects them as orphans.
func killStragglers(r *reaper.Reaper) {
	kids := children()
	if len(kids) == 0 {
		return
	}
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(children()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		r.Drain()
	}
	for _, pid := range children() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 100 && len(children()) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
		r.Drain()
	}
}

// children lists this process's children (alive or zombie) from
// /proc/self/task/*/children.
func children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// chanOnce closes a channel once.
type chanOnce struct{ once sync.Once }

func (o *chanOnce) close(c chan struct{}) { o.once.Do(func() { close(c) }) }
