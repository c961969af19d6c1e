package daemon

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/supervisor"
)

// ttyKeeper is the daemon's side of the keeper process (package keeper),
// the supervisors' Keeper: it hands the keeper a copy of each tty run's
// master, so that the terminal outlives this daemon as the run does, and
// at start takes back the masters an earlier daemon's runs left there.
//
// The keeper is found at start (state_dir/keep.sock) or started when the
// first tty run needs one. The daemon keeps a master of its own of every
// run it hands the keeper, and watches the keeper (a pidfd): one that dies
// is said at once and replaced, and the new one is handed every live
// run's master again (keeperwatch.go, docs/terminal.md#a-keeper-that-dies).
// tend down tells it to go (quit); a keeper this daemon started is its
// child, and it waits for it.
//
// The daemon hands the keeper the masters of terminals whose runs may be
// root's, so it talks only to the keeper it started or the one an earlier
// daemon recorded (keeper.PIDFile), of its own uid (keeper.Dial checks the
// peer). Anything else serving the socket is refused, said on stderr, and
// replaced by a keeper of this daemon's own; the run keeps its terminal
// either way, the daemon's own master (docs/trust.md#sockets).
type ttyKeeper struct {
	d    *daemon
	sock keeper.Socket

	mu     sync.Mutex             // guards what follows, and serialises the exchanges
	c      *keeper.Client         // the connection; nil when none
	pid    int                    // the keeper this daemon started; 0 if none
	child  chan struct{}          // closed when the keeper this daemon started exits; nil if none was
	kept   map[string]keeper.Run  // the run each instance's master was kept for, for its Drop
	taken  map[string]keeper.Held // masters handed back at start, not yet claimed by an adoption
	noted  bool                   // a failure to keep was said once
	closed bool                   // tend down: no keeper is started any more

	// masters is the daemon's own copy of each kept run's master, by
	// instance id (the run is kept[id]), for a keeper that replaces one
	// that died; watched is the keeper whose death is awaited (0: none),
	// and stop (a pipe) ends the watches at quit.
	masters  map[string]int // by instance id; its run is kept[id]
	watched  int
	stopR    int
	stopW    int
	watches  sync.WaitGroup
	unheld   bool          // a keeper died, and not every master was handed to another since
	restarts atomic.Uint64 // keepers replaced after dying (tend_keeper_restarts_total)
}

var _ supervisor.Keeper = (*ttyKeeper)(nil)

// openKeeper connects to the keeper an earlier daemon left, if any, and
// takes back every master it holds, for the adoptions to claim.
func (d *daemon) openKeeper() *ttyKeeper {
	k := &ttyKeeper{d: d, sock: keeper.At(d.state.Root), kept: map[string]keeper.Run{}, taken: map[string]keeper.Held{},
		masters: map[string]int{}, stopR: -1, stopW: -1}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err == nil {
		k.stopR, k.stopW = p[0], p[1]
	}
	c, err := keeper.Dial(k.sock, k.knownLocked()...)
	if err != nil {
		k.refusedLocked(err)
		return k // none: started when a tty run first needs one
	}
	held, err := c.List()
	if err != nil {
		d.note("keeper: %v", err)
		c.Close()
		return k
	}
	k.c = c
	k.watchLocked()
	for _, h := range held {
		if old, ok := k.taken[h.ID]; ok {
			unix.Close(old.FD)
		}
		k.taken[h.ID] = h
	}
	return k
}

// Keep implements supervisor.Keeper.
func (k *ttyKeeper) Keep(id string, pid int, fd int) {
	ticks, err := reaper.StartTicks(pid)
	if err != nil {
		return // the run is gone already
	}
	r := keeper.Run{ID: id, PID: pid, Ticks: ticks}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.holdLocked(id, r, fd)
	for try := 0; try < 2; try++ {
		if err = k.connectLocked(); err == nil {
			if err = k.c.Keep(r, fd); err == nil {
				k.kept[id] = r
				if k.unheld {
					k.rehandLocked() // a keeper died and none replaced it then
				}
				return
			}
			// Gone: the next try starts another, and a keeper that died
			// is replaced with every master handed again, this one too.
			k.c.Close()
			k.c = nil
			if k.lostLocked() {
				return
			}
		}
	}
	if !k.noted && !k.closed {
		k.noted = true
		k.d.note("keeper: %v (tty runs started now do not outlive the daemon with their terminal)", err)
	}
}

// Drop implements supervisor.Keeper.
func (k *ttyKeeper) Drop(id string, pid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.kept[id]
	if !ok || r.PID != pid {
		return
	}
	delete(k.kept, id)
	k.releaseLocked(id)
	if k.c != nil {
		_ = k.c.Drop(r) // a keeper that went drops it anyway
	}
}

// Take implements supervisor.Keeper.
func (k *ttyKeeper) Take(id string, pid int) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.taken[id]
	if !ok || h.PID != pid {
		return -1, false
	}
	delete(k.taken, id)
	k.kept[id] = h.Run
	k.holdLocked(id, h.Run, h.FD)
	return h.FD, true
}

// held returns the runs whose masters an earlier daemon left with the
// keeper, by instance id: each names its run's leader for good (pid and
// start time), a record of its own beside runs.json.
func (k *ttyKeeper) held() map[string]keeper.Run {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]keeper.Run, len(k.taken))
	for id, h := range k.taken {
		out[id] = h.Run
	}
	return out
}

// settle lets go of the masters no adoption claimed, keeping those of runs
// offered again for a later adoption (a program that may come back).
func (k *ttyKeeper) settle(later map[string]supervisor.Adoption) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, h := range k.taken {
		if a, ok := later[id]; ok && a.PID == h.PID {
			continue
		}
		unix.Close(h.FD)
		delete(k.taken, id)
		if k.c != nil {
			_ = k.c.Drop(h.Run)
		}
	}
}

// connectLocked makes sure there is a connection: to the keeper serving
// the socket, or to one started now.
func (k *ttyKeeper) connectLocked() error {
	if k.c != nil {
		return nil
	}
	c, err := keeper.Dial(k.sock, k.knownLocked()...)
	if err == nil {
		k.c = c
		k.watchLocked()
		return nil
	}
	k.refusedLocked(err)
	if k.closed {
		return keeper.ErrClosed
	}
	if err := k.startLocked(); err != nil {
		return err
	}
	c, err = keeper.Dial(k.sock, k.knownLocked()...)
	if err != nil {
		return err
	}
	k.c = c
	k.watchLocked()
	return nil
}

// knownLocked are the pids the peer of tend's keeper's socket may have:
// the keeper this daemon started, the one the state directory records (and
// the daemon that made its socket), and this process itself. The daemon
// makes the listening socket, and until the keeper listens on it again the
// kernel names the daemon as the peer (so it does for a keeper started
// before a tend upgrade by a version whose keeper did not listen again).
func (k *ttyKeeper) knownLocked() []int {
	return append(keeper.Recorded(k.d.state.Root), k.pid, os.Getpid())
}

// refusedLocked says so when err is the refusal of a socket served by
// something other than tend's keeper: nothing was sent to it.
func (k *ttyKeeper) refusedLocked(err error) {
	if errors.Is(err, keeper.ErrUntrusted) {
		k.d.note("%v: refused, nothing handed to it; tty runs keep their terminals, and a keeper of this daemon's replaces it", err)
	}
}

// startLocked starts a keeper: this binary again, as tend-keeper, in a
// session of its own, with /dev/null for its streams and the listening
// socket as descriptor 3 and the state directory as descriptor 4, and
// nothing else.
func (k *ttyKeeper) startLocked() error {
	lfd, err := keeper.Listen(k.sock)
	if err != nil {
		return err
	}
	defer unix.Close(lfd)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   keeper.Env(),
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), uintptr(lfd), uintptr(k.sock.DirFD)},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	exited := make(chan struct{})
	pid, err := k.d.reaper.Spawn(func() (int, error) {
		return syscall.ForkExec("/proc/self/exe", []string{keeper.Arg0}, attr)
	}, func(reaper.Status) { close(exited) }, false)
	if err != nil {
		return err
	}
	k.child, k.pid = exited, pid
	if err := keeper.Record(k.d.state.Root, pid); err != nil {
		k.d.note("%v (a daemon started after this one will not use this keeper)", err)
	}
	return nil
}

// quit tells the keeper the daemon stops (it exits once it holds nothing,
// and removes its socket as it goes), and waits a little for the one this
// daemon started.
func (k *ttyKeeper) quit() {
	k.mu.Lock()
	k.closed = true
	c, child, pid := k.c, k.child, k.pid
	k.c = nil
	for id, h := range k.taken {
		unix.Close(h.FD)
		delete(k.taken, id)
	}
	for id := range k.masters {
		k.releaseLocked(id)
	}
	k.mu.Unlock()
	k.stopWatches()
	if c == nil && child != nil {
		c, _ = keeper.Dial(k.sock, pid)
	}
	if c != nil {
		_ = c.Quit()
		if child != nil {
			select {
			case <-child:
			case <-time.After(10 * time.Second): // it still holds runs left alone, or a loaded machine has not run it yet
			}
		}
		// Never a probe of the socket here: a connection to a keeper told
		// to quit calls that off.
		return
	}
	// No keeper answered: a socket left by one that died is removed.
	_, _ = keeper.RemoveStale(k.sock)
}
