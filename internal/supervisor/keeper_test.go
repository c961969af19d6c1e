package supervisor

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
)

// testKeeper is a real terminal keeper (this test binary re-executed as
// one: TestMain calls roles.Be) for the harness's tty runs, started by the
// first Ready, as the daemon's is; it hands nothing back (no earlier
// daemon).
type testKeeper struct {
	t    *testing.T
	root *statedir.Dir

	mu   sync.Mutex
	c    *keeper.Client
	kept map[string]keeper.Run

	changed func(id string) // the capture's Changed
}

func newTestKeeper(t *testing.T, root *statedir.Dir) *testKeeper {
	return &testKeeper{t: t, root: root, kept: map[string]keeper.Run{}}
}

func (k *testKeeper) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		return nil
	}
	sock := keeper.At(k.root)
	lfd, err := keeper.Listen(sock)
	if err != nil {
		return err
	}
	l := os.NewFile(uintptr(lfd), "listener")
	defer l.Close()
	dfd, err := unix.Dup(k.root.FD())
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dfd), "state dir")
	defer d.Close()
	exe, _ := os.Executable()
	cmd := &exec.Cmd{Path: exe, Args: []string{keeper.Arg0}, Env: keeper.Env(), ExtraFiles: []*os.File{l, d},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c, held, err := keeper.Dial(sock, keeper.Notices{Wrote: k.wrote, Ended: func(r keeper.Run) { k.wrote(r.ID) }}, cmd.Process.Pid, os.Getpid())
	if err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	for _, h := range held {
		unix.Close(h.FD)
	}
	k.c = c
	k.t.Cleanup(func() { // after the harness's shutdown: cleanups run last first
		c.Quit()
		cmd.Process.Kill()
		<-exited
	})
	return nil
}

func (k *testKeeper) wrote(id string) {
	if k.changed != nil {
		k.changed(id)
	}
}

func (k *testKeeper) Keep(id string, pid int, fd int, log keeper.LogSpec) error {
	ticks, _ := reaper.StartTicks(pid)
	if err := k.Ready(); err != nil {
		return err
	}
	r := keeper.Run{ID: id, PID: pid, Ticks: ticks}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[id] = r
	return k.c.Keep(r, log, fd)
}

func (k *testKeeper) Drop(id string, pid int) {
	k.mu.Lock()
	r, ok := k.kept[id]
	c := k.c
	k.mu.Unlock()
	if ok && r.PID == pid && c != nil {
		_ = c.Drop(r)
	}
}

func (k *testKeeper) Take(string, int, keeper.LogSpec) (int, bool) { return -1, false }
