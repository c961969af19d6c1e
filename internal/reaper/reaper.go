// Package reaper is the only place in tend that waits for "any child".
//
// wait4(-1) is process-wide: two callers would steal each other's children,
// and the robbed one would wait forever. So exactly one goroutine drains
// exited children, woken by SIGCHLD (plus a slow safety tick), and routes each
// pid to the owner registered for it. An exited pid nobody registered (an
// orphan adopted as subreaper or PID 1) is counted and dropped.
//
// Registration is atomic with the fork: Spawn holds the registry lock across
// the fork and the insert, and the drain holds the same lock, so the reaper
// can never reap a child before its owner is known. That lock also covers the
// other half of the race: Go's ForkExec waits for a child whose exec failed,
// which a concurrent wait4(-1) would otherwise steal.
//
// The drain never passes __WALL or __WCLONE: children that do not signal
// SIGCHLD on exit (such as the Go runtime's own pidfd self-check clone) are
// not ours to take.
package reaper

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Status is one reaped child.
type Status struct {
	PID    int
	Wait   syscall.WaitStatus
	MaxRSS int64     // peak resident set in bytes (the child and its reaped descendants)
	At     time.Time // when the reaper collected it
	Woke   time.Time // when the SIGCHLD (or tick) that led to it woke the reaper
	// Adopted is set for a run an earlier daemon started: it ended, but its
	// status went to its real parent and Wait says nothing.
	Adopted bool
}

// Owner receives a registered child's Status on the reaper's goroutine. It
// must not block (send to a buffered channel).
type Owner func(Status)

// route is where a registered pid's exit goes.
type route struct {
	owner      Owner
	killGroup  bool     // SIGKILL the rest of its process group when it exits
	pidfd      *os.File // an adopted run (not our child): its exit comes through this
	pidfdN     int      // pidfd's descriptor, valid while the route exists
	startTicks uint64   // an adopted run's start time: its pid names it only with this
}

// Reaper owns wait4 for the whole process. Create one per process.
type Reaper struct {
	mu     sync.Mutex     // held across every fork, signal and wait; guards routes, held, paused and unpause
	routes map[int]route  // live (unreaped) registered pids; guarded by mu
	held   map[int]Status // exits of expected pids collected before their owner came (Expect)
	// paused: exits are left where they are (see Pause); unpause is closed
	// by Resume.
	paused  bool
	unpause chan struct{}
	orphan  atomic.Uint64  // exited children with no owner
	sigs    chan os.Signal // SIGCHLD wake-ups
	stop    chan struct{}  // closed by Stop
	done    chan struct{}  // closed when the loop has returned
	once    sync.Once      // guards Stop
	tick    time.Duration  // safety drain interval
	notify  func(chan<- os.Signal, ...os.Signal)
}

// New returns a stopped Reaper.
func New() *Reaper {
	return &Reaper{
		routes: make(map[int]route),
		held:   make(map[int]Status),
		sigs:   make(chan os.Signal, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		tick:   10 * time.Second, // a safety net: each pass makes the kernel walk every child
		notify: signal.Notify,
	}
}

// Start makes the process a child subreaper if asked (orphaned grandchildren
// then come to us instead of init) and starts the drain loop.
func (r *Reaper) Start(subreaper bool) error {
	if subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
		}
	}
	r.notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return nil
}

// Stop ends the drain loop. Children still registered are not reaped.
func (r *Reaper) Stop() {
	r.once.Do(func() {
		signal.Stop(r.sigs)
		close(r.stop)
	})
	<-r.done
}

func (r *Reaper) loop() {
	defer close(r.done)
	t := time.NewTicker(r.tick) // a lost SIGCHLD cannot strand an exit for long
	defer t.Stop()
	woke := time.Now()
	for {
		r.drain(woke)
		select {
		case <-r.sigs:
		case <-t.C:
		case <-r.stop:
			return
		}
		woke = time.Now()
	}
}

// Spawn runs fork (which starts one child and returns its pid) under the
// registry lock and registers the pid to owner before the lock is released.
// With killGroup, when the child exits the reaper SIGKILLs what is left of its
// process group before collecting it (the child must lead its own group).
func (r *Reaper) Spawn(fork func() (int, error), owner Owner, killGroup bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, err
	}
	r.routes[pid] = route{owner: owner, killGroup: killGroup}
	return pid, nil
}

// Run forks a child with fork, registered as Spawn does, and returns its
// status once the drain has collected it: for a short command of the
// daemon's own, which must not wait for its child itself (its wait and
// the drain's would steal each other's children). The drain loop must be
// running (Start).
func (r *Reaper) Run(fork func() (int, error)) (Status, error) {
	done := make(chan Status, 1)
	if _, err := r.Spawn(fork, func(s Status) { done <- s }, false); err != nil {
		return Status{}, err
	}
	return <-done, nil
}

// ErrGone is returned by Signal for a pid that is no longer registered: it
// has been reaped (or was never ours), so its number may belong to a stranger.
var ErrGone = errors.New("process already reaped")

// Signal sends sig to a registered pid, or to its process group with group.
// It holds the registry lock, so the pid cannot be reaped (and its number
// reused) between the check and the kill.
func (r *Reaper) Signal(pid int, sig syscall.Signal, group bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, ok := r.routes[pid]
	if !ok {
		return ErrGone
	}
	if rt.pidfd != nil {
		return signalAdoptedLocked(pid, rt.pidfdN, sig, group)
	}
	target := pid
	if group {
		target = -pid
	}
	err := syscall.Kill(target, sig)
	if errors.Is(err, syscall.ESRCH) && group {
		err = syscall.Kill(pid, sig) // the child has not reached setpgid yet
	}
	return err
}

// SignalUnowned ends the orphans (children no one registered: a subreaper's
// or PID 1's adopted ones) that match accepts: SIGKILL to each and to the
// process group it leads. It returns their pids. It holds the registry lock,
// which the drain needs too, so none of them can be reaped (and its pid
// reused) before the kill. The kernel hands orphans to the subreaper's
// first live thread, its main one, so only that thread's children list is
// read: one small read when there are none.
func (r *Reaper) SignalUnowned(match func(pid int) bool) (killed []int) {
	self := strconv.Itoa(os.Getpid())
	b, _ := os.ReadFile("/proc/self/task/" + self + "/children")
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fields {
		pid, err := strconv.Atoi(f)
		if _, owned := r.routes[pid]; err != nil || owned || !match(pid) {
			continue
		}
		if pg, err := syscall.Getpgid(pid); err == nil && pg == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// Orphans is how many unowned children have been reaped.
func (r *Reaper) Orphans() uint64 { return r.orphan.Load() }

// Drain collects every child that has exited and routes it. The drain loop
// calls it on each SIGCHLD; it is exported for PID 1 mode and tests.
func (r *Reaper) Drain() { r.drain(time.Now()) }

func (r *Reaper) drain(woke time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return
	}
	for {
		pid, ok := peek()
		if !ok {
			return
		}
		rt, owned := r.routes[pid]
		if owned && rt.killGroup {
			// The leader is a zombie, so its pid (and the group id) cannot
			// have been reused: this kill only reaches its own stragglers.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru)
		if err != nil || got != pid {
			return // someone else collected it; nothing to route
		}
		if !owned {
			r.orphan.Add(1)
			continue
		}
		delete(r.routes, pid)
		st := Status{PID: pid, Wait: ws, MaxRSS: ru.Maxrss * 1024, At: time.Now(), Woke: woke}
		if rt.owner == nil { // expected, not claimed yet
			r.held[pid] = st
			continue
		}
		rt.owner(st)
	}
}

// peek returns the pid of an exited child without collecting it (WNOWAIT),
// so the zombie keeps its pid while the drain decides what to do.
func peek() (int, bool) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, false // ECHILD: no children at all
		}
		pid := siginfoPID(&info)
		return pid, pid > 0 // 0: children exist, none has exited
	}
}

// siginfoPID reads si_pid, which x/sys/unix does not name: on 64-bit Linux
// it is the first field of the union after si_signo, si_errno and si_code,
// which the union's 8-byte alignment puts at offset 16.
func siginfoPID(info *unix.Siginfo) int {
	const off = unsafe.Sizeof(int32(0)) * 4
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
