package spawn

// The exec shim: how a run learns its own pid before it exists.
//
// systemd gives a service WATCHDOG_PID, its own pid, so that a client's
// sd_watchdog_enabled() (go-systemd's SdWatchdogEnabled) can tell the
// variable is meant for it and not inherited from a parent. syscall.ForkExec
// fixes the child's environment before the fork, when its pid is not known
// yet. So a run of a program with `watchdog` is started in two steps: the
// daemon forks and execs its own binary (/proc/self/exe) as the shim, with
// the real path and argv in its argv and the marker variable shimVar; the
// shim, already the process the run will be (same pid, session, group,
// credentials, cwd, descriptors, cgroup), sets WATCHDOG_PID to its own pid
// and execve's the program in its own place.
//
// A failed execve must stay a spawn failure with its errno, as for a direct
// ForkExec. So, as Go's forkExec does, the shim reports the errno on a
// descriptor that is close-on-exec (one end of a socket pair): EOF means the
// program runs. The daemon reads that report after reaper.Spawn has
// returned, outside the reaper's lock (the shim's start, a Go runtime's,
// takes milliseconds, and every exit of the fleet waits while that lock is
// held). A shim that failed then waits for the daemon to close its end
// before it exits, and the daemon marks the launch failed before it closes:
// so the shim's exit, routed by the reaper to the launch, is dropped and
// never reaches the run's owner, and Start returns the same error it
// returns for a direct exec that fails (ENOENT, EACCES, ENOEXEC...).
//
// main becomes the shim with MaybeShim (internal/roles) before anything
// else runs, and so does the TestMain of every test binary that runs the
// daemon in-process. It costs the start of a Go runtime (a few milliseconds to a
// few tens on a busy machine), which is why only programs with `watchdog`
// pay it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
)

const (
	// shimVar marks a process as the shim; its value is the number of the
	// descriptor to report a failed execve on. The shim removes it.
	shimVar = "TEND_EXEC_SHIM"
	// shimArg0 is the shim's argv[0], the second half of the marker (a
	// TEND_EXEC_SHIM that leaked into tend's own environment must not turn
	// the daemon into a shim) and what ps shows for the instant it runs.
	shimArg0 = "tend-exec-shim"
	// selfExe is the daemon's binary, resolved by the child itself: the
	// magic link works for a run of another user even when the binary's
	// directory is closed to it, and after the binary was replaced on disk.
	selfExe = "/proc/self/exe"
	// shimExit is the shim's exit status when it cannot exec (never seen
	// by an owner: the daemon collects it).
	shimExit = 127
	// shimTimeout bounds how long Start waits for the shim to exec; a shim
	// that takes longer is killed and the spawn fails with ETIMEDOUT rather
	// than hold its start slot for good.
	shimTimeout = 30 * time.Second
)

// Variables of systemd's watchdog protocol.
const (
	watchdogUSecVar = "WATCHDOG_USEC"
	watchdogPIDVar  = "WATCHDOG_PID"
)

// MaybeShim becomes the exec shim, and never returns, when this process
// was started as one (argv[0] "tend-exec-shim" and the marker variable);
// otherwise it returns at once. main calls it first (internal/roles), and
// so does the TestMain of every test binary that starts runs: the shim is
// that binary, re-executed.
func MaybeShim() {
	if fd, ok := syscall.Getenv(shimVar); ok && len(os.Args) >= 3 && os.Args[0] == shimArg0 {
		runShim(fd, os.Args[1], os.Args[2:])
	}
}

// runShim is the shim's whole life: it never returns.
func runShim(fdText, path string, argv []string) {
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "tend: exec shim: bad %s=%q\n", shimVar, fdText)
		os.Exit(shimExit)
	}
	// Closed by a successful execve: the daemon's read sees EOF.
	syscall.CloseOnExec(fd)
	env := shimEnv(os.Environ(), os.Getpid())
	err = syscall.Exec(path, argv, env)
	errno, ok := err.(syscall.Errno)
	if !ok {
		errno = syscall.EINVAL // a NUL in an argument: what execve itself would say
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(errno))
	if _, err := syscall.Write(fd, b[:]); err == nil {
		// Exit only once the daemon has taken the report (it closes its end,
		// or dies): by then it knows this exit is the shim's, not a run's.
		for {
			if n, err := syscall.Read(fd, b[:]); n <= 0 && err != syscall.EINTR {
				break
			}
		}
	}
	os.Exit(shimExit)
}

// shimEnv is the run's environment: the shim's without the marker, and
// WATCHDOG_PID set to pid, in the place of an earlier one or at the end.
func shimEnv(env []string, pid int) []string {
	out := make([]string, 0, len(env)+1)
	set := false
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		switch {
		case key == shimVar:
		case key == watchdogPIDVar:
			if !set {
				out, set = append(out, watchdogPIDVar+"="+strconv.Itoa(pid)), true
			}
		default:
			out = append(out, kv)
		}
	}
	if !set {
		out = append(out, watchdogPIDVar+"="+strconv.Itoa(pid))
	}
	return out
}

// launch is one run's fork and exec, direct or through the shim. Begin
// hands the fork to the forker thread, and Wait takes its pid and waits
// for the exec:
//
//	l := newLaunch(path, argv, attr, req.Spec.Watchdog > 0, req.Owner)
//	err := l.begin(r)
//	...
//	pid, err := l.end()
//	if err == nil {
//		err = l.wait(r, pid)
//	}
type launch struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	shim  bool
	next  reaper.Owner // the run's owner
	fd    int          // the daemon's end of the report socket, -1 for none: set by begin, closed by end or wait
	peer  int          // the shim's end, the daemon's copy, closed once the shim has its own (end); -1 for none
	res   <-chan forkRes
	owner reaper.Owner // what reaper.Spawn routes the exit to

	// failed is set (before the shim may exit) when the shim could not exec
	// the program, or before the run is killed because its output cannot
	// be read: its exit is then dropped instead of passed on to next.
	failed atomic.Bool
}

func newLaunch(path string, argv []string, attr *syscall.ProcAttr, shim bool, owner reaper.Owner) *launch {
	l := &launch{path: path, argv: argv, attr: attr, shim: shim, next: owner, fd: -1, peer: -1}
	l.owner = func(st reaper.Status) {
		if !l.failed.Load() {
			l.next(st)
		}
	}
	return l
}

// begin hands the child's fork to the forker thread, where reaper.Spawn
// registers it to l.owner under the registry lock; end waits for it.
// Direct, it is ForkExec itself, done once the program runs; through the
// shim it is done once the shim runs, and wait learns whether the program
// does.
func (l *launch) begin(r *reaper.Reaper) error {
	path, argv, attr := l.path, l.argv, l.attr
	if l.shim {
		// Close-on-exec in the daemon, so no other child inherits either
		// end; ForkExec's dup2 gives the shim its end without the flag.
		p, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		a := *l.attr
		fd := len(a.Files)
		a.Files = append(slices.Clip(a.Files), uintptr(p[1]))
		a.Env = append(slices.Clip(a.Env), shimVar+"="+strconv.Itoa(fd))
		path, argv, attr = selfExe, append([]string{shimArg0, l.path}, l.argv...), &a
		l.fd, l.peer = p[0], p[1]
	}
	l.res = forkAsync(path, argv, attr, func(fork func() (int, error)) (int, error) { return r.Spawn(fork, l.owner, true) })
	return nil
}

// end waits for the fork begin handed over and returns its pid.
func (l *launch) end() (int, error) {
	res := <-l.res
	if l.peer >= 0 {
		syscall.Close(l.peer)
		l.peer = -1
	}
	if res.err != nil && l.fd >= 0 {
		syscall.Close(l.fd)
		l.fd = -1
	}
	return res.pid, res.err
}

// wait returns once the program runs, with nil, or with the errno of its
// failed execve (ETIMEDOUT when the shim did not report in shimTimeout;
// it is killed). It runs outside the reaper's lock, after reaper.Spawn has
// returned pid.
func (l *launch) wait(r *reaper.Reaper, pid int) error {
	if l.fd < 0 {
		return nil
	}
	defer func() {
		syscall.Close(l.fd) // lets a shim that failed exit
		l.fd = -1
	}()
	err := awaitExec(l.fd)
	if err != nil {
		l.failed.Store(true)
		if errors.Is(err, syscall.ETIMEDOUT) {
			r.Signal(pid, syscall.SIGKILL, true)
		}
	}
	return err
}

// awaitExec reads the shim's report: nil at EOF (the program was exec'd,
// or the shim died before it could say anything: either way its exit is
// the run's to report), the errno of a failed execve, or ETIMEDOUT.
func awaitExec(fd int) error {
	deadline := time.Now().Add(shimTimeout)
	var b [4]byte
	got := 0
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return syscall.ETIMEDOUT
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		if fds[0].Revents == 0 {
			continue // timed out: the deadline check ends it
		}
		n, err := syscall.Read(fd, b[got:])
		switch {
		case err == syscall.EINTR || err == syscall.EAGAIN:
			continue
		case err != nil:
			return err
		case n == 0:
			if got == 0 {
				return nil
			}
			return syscall.EIO // a torn report: never written by the shim
		}
		if got += n; got == len(b) {
			return syscall.Errno(binary.LittleEndian.Uint32(b[:]))
		}
	}
}
