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
// master, which the keeper reads always into the run's log, wakes the
// followers of that log whenever the keeper has written (the screen's,
// sessionfollow.go in package terminal; tend logs -f), and at start takes back
// the masters an earlier daemon's runs left there.
//
// The keeper is found at start (state_dir/keep.sock) or started when the
// first tty run needs one; a tty run does not start without one (Ready).
// The daemon keeps a master of its own of every run it hands the keeper,
// and watches the keeper (a pidfd): one that dies is said at once and
// replaced, and the new one is handed every live run's master again
// (keeperwatch.go, docs/terminal.md#a-keeper-that-dies). A keeper of an
// earlier version, which only held masters (keeper.Client.Old), gives its
// masters up and is told to go; a keeper of this version reads them from
// then on. tend down tells the keeper to go (quit); a keeper this daemon
// started is its child, and it waits for it.
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

	mu     sync.Mutex                // guards what follows, and serialises the exchanges but Drop's wait
	c      *keeper.Client            // the connection; nil when none
	pid    int                       // the keeper this daemon started; 0 if none
	child  chan struct{}             // closed when the keeper this daemon started exits; nil if none was
	kept   map[string]keeper.Run     // the run each instance's master was kept for, for its Drop
	logs   map[string]keeper.LogSpec // the log each kept run's master is read into
	taken  map[string]takenMaster    // masters handed back at start, not yet claimed by an adoption
	noted  bool                      // a failure to keep was said once
	closed bool                      // tend down: no keeper is started any more

	// old is a keeper of an earlier version found at start, which only
	// holds masters; it is told to go once a keeper of this version reads
	// them (settle), so that a terminal is never held by this daemon alone.
	old     *keeper.Client
	oldHeld []keeper.Master

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

	// The keeper's notices come on its connection's own goroutine, which
	// must never wait for mu (a Drop holds the connection while it waits
	// for its answer): what they need is guarded by wmu.
	wmu   sync.Mutex        // guards what follows
	bases map[string]string // each kept instance's log's base name, for the storage health
}

// takenMaster is a master handed back at start; old: by a keeper of an
// earlier version, which did not read it (this daemon's keeper will).
type takenMaster struct {
	keeper.Master
	old bool
}

var _ supervisor.Keeper = (*ttyKeeper)(nil)

// openKeeper connects to the keeper an earlier daemon left, if any, and
// takes back every master it holds, for the adoptions to claim.
func (d *daemon) openKeeper() *ttyKeeper {
	k := &ttyKeeper{d: d, sock: keeper.At(d.state.Root), kept: map[string]keeper.Run{}, logs: map[string]keeper.LogSpec{},
		taken: map[string]takenMaster{}, masters: map[string]int{}, stopR: -1, stopW: -1,
		bases: map[string]string{}}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err == nil {
		k.stopR, k.stopW = p[0], p[1]
	}
	c, held, err := keeper.Dial(k.sock, k.notices(), k.knownLocked()...)
	if err != nil {
		k.refusedLocked(err)
		return k // none: started when a tty run first needs one
	}
	old := c.Old()
	if old {
		k.old, k.oldHeld = c, held // retired once the adoptions have handed its masters on (settle)
	} else {
		k.c = c
		k.watchLocked()
	}
	for _, h := range held {
		if prev, ok := k.taken[h.ID]; ok {
			unix.Close(prev.FD)
		}
		k.taken[h.ID] = takenMaster{Master: h, old: old}
	}
	return k
}

// retire tells a keeper of an earlier version, which only held masters,
// to let go of them and to go: this daemon has handed each to a keeper of
// its own version, which reads it, as its adoption claimed it (Take).
func (k *ttyKeeper) retire(c *keeper.Client, held []keeper.Master) {
	runs := make([]keeper.Run, len(held))
	for i, h := range held {
		runs[i] = h.Run
	}
	c.Retire(runs)
	k.d.note("keeper: a keeper of protocol version %d (it did not read terminals) gave up %d tty run(s)' terminals; a keeper of version %d reads them from now on",
		c.Version(), len(held), keeper.Version)
}

// notices are what the daemon does with what the keeper says unasked.
func (k *ttyKeeper) notices() keeper.Notices {
	return keeper.Notices{
		Wrote:  k.wrote,
		Ended:  func(r keeper.Run) { k.wrote(r.ID) },
		Failed: k.failed,
		Healed: k.healed,
	}
}

// wrote wakes the followers of id's log: the screen's, tend logs -f.
func (k *ttyKeeper) wrote(id string) { k.d.capture.Changed(id) }

// failed says out loud that a tty run's output could not be kept: a line,
// and the log counted as a state file that fails (degraded_storage, tend
// doctor, tend_state_write_errors_total) until the keeper writes it again.
func (k *ttyKeeper) failed(m keeper.Failed) {
	k.wmu.Lock()
	base := k.bases[m.ID]
	k.wmu.Unlock()
	k.d.note("%s: terminal output lost (%d bytes), its log cannot be written: %s", m.ID, m.Bytes, m.Err)
	if base != "" {
		k.d.state.Root.Health().Failed(k.d.state.Logs.Rel(base+".log"), errors.New(m.Err))
	}
}

func (k *ttyKeeper) healed(id string) {
	k.wmu.Lock()
	base := k.bases[id]
	k.wmu.Unlock()
	if base != "" {
		k.d.state.Root.Health().Wrote(k.d.state.Logs.Rel(base + ".log"))
	}
}

// Ready implements supervisor.Keeper.
func (k *ttyKeeper) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return keeper.ErrClosed
	}
	return k.connectLocked()
}

// Keep implements supervisor.Keeper.
func (k *ttyKeeper) Keep(id string, pid int, fd int, log keeper.LogSpec) error {
	// A run whose leader is gone already (reaped) is kept with no start
	// time: the keeper reads what it left in its terminal all the same.
	ticks, _ := reaper.StartTicks(pid)
	r := keeper.Run{ID: id, PID: pid, Ticks: ticks}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.holdLocked(id, r, fd, log)
	return k.keepLocked(id, r, fd, log)
}

// keepLocked hands the keeper of the moment fd, started if need be.
func (k *ttyKeeper) keepLocked(id string, r keeper.Run, fd int, log keeper.LogSpec) error {
	var err error
	for try := 0; try < 2; try++ {
		if err = k.connectLocked(); err == nil {
			if err = k.c.Keep(r, log, fd); err == nil {
				k.kept[id] = r
				if k.unheld {
					k.rehandLocked() // a keeper died and none replaced it then
				}
				return nil
			}
			// Gone: the next try starts another, and a keeper that died
			// is replaced with every master handed again, this one too.
			k.c.Close()
			k.c = nil
			if k.lostLocked() {
				return nil
			}
		}
	}
	if !k.noted && !k.closed {
		k.noted = true
		k.d.note("keeper: %v (tty runs started now are not read: they block once their terminal is full)", err)
	}
	return err
}

// Drop implements supervisor.Keeper: it returns once the keeper has
// written all the run wrote, or did not answer in time.
func (k *ttyKeeper) Drop(id string, pid int) {
	k.mu.Lock()
	r, ok := k.kept[id]
	c := k.c
	k.mu.Unlock()
	if !ok || r.PID != pid {
		return
	}
	for try := 0; c != nil && try < 2; try++ {
		err := c.Drop(r)
		if err == nil || !errors.Is(err, keeper.ErrClosed) {
			break
		}
		// The keeper died meanwhile: its replacement, handed this
		// master again, reads what is left of it.
		time.Sleep(100 * time.Millisecond)
		k.mu.Lock()
		next := k.c
		k.mu.Unlock()
		if next == c {
			break
		}
		c = next
	}
	// The keeper's last records are on disk now, and its word that it
	// wrote them may come after its dropped: the log's followers (the
	// screen's last feed, tend run -a's answer) look at the file now.
	// Without this a run that ended at once showed none of its output.
	k.wrote(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.kept[id]; ok && cur == r {
		delete(k.kept, id)
		delete(k.logs, id)
		k.releaseLocked(id)
	}
}

// Take implements supervisor.Keeper.
func (k *ttyKeeper) Take(id string, pid int, log keeper.LogSpec) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.taken[id]
	if !ok || h.PID != pid {
		return -1, false
	}
	delete(k.taken, id)
	k.kept[id] = h.Run
	k.holdLocked(id, h.Run, h.FD, log)
	if h.old {
		_ = k.keepLocked(id, h.Run, h.FD, log) // said if it fails
	}
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
		if k.c != nil && !h.old {
			_ = k.c.Drop(h.Run)
		}
	}
	if k.old != nil {
		k.retire(k.old, k.oldHeld)
		k.old, k.oldHeld = nil, nil
	}
}

// connectLocked makes sure there is a connection: to the keeper serving
// the socket, or to one started now.
func (k *ttyKeeper) connectLocked() error {
	if k.c != nil {
		return nil
	}
	var c *keeper.Client
	var held []keeper.Master
	err := keeper.ErrClosed
	if k.old == nil { // else the socket is the old keeper's: a keeper of this version is started
		c, held, err = keeper.Dial(k.sock, k.notices(), k.knownLocked()...)
	}
	if err == nil && c.Old() {
		// Found only now (the socket was not served at start): its
		// masters are this daemon's already, handed to a keeper of this
		// version as their runs are adopted.
		k.retire(c, held)
		for _, h := range held {
			unix.Close(h.FD)
		}
	} else if err == nil {
		for _, h := range held {
			unix.Close(h.FD) // this daemon holds its own of each
		}
		k.c = c
		k.watchLocked()
		return nil
	} else {
		k.refusedLocked(err)
	}
	if k.closed {
		return keeper.ErrClosed
	}
	if err := k.startLocked(); err != nil {
		return err
	}
	c, held, err = keeper.Dial(k.sock, k.notices(), k.knownLocked()...)
	if err != nil {
		return err
	}
	for _, h := range held {
		unix.Close(h.FD)
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
	if k.old != nil {
		k.old.Close() // an old keeper never retired (no adoption ran): it holds on, as it would have
		k.old = nil
	}
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
		var held []keeper.Master
		c, held, _ = keeper.Dial(k.sock, keeper.Notices{}, pid)
		for _, h := range held {
			unix.Close(h.FD)
		}
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
