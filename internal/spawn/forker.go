package spawn

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/limits"
)

// Forking from a small descriptor table.
//
// A fork copies the forking thread's descriptor table and the child's exec
// then closes every close-on-exec entry of it, one file at a time. With ten
// thousand runs the daemon holds twenty thousand descriptors (each run's
// notify socket and output pipe), so every start would copy and close them
// all: start-up time grows with the square of the fleet. So forks happen on
// one OS thread that has a descriptor table of its own (unshare(CLONE_FILES))
// made when the daemon starts, before it opens anything (StartForker): it
// holds the standard streams and the Go runtime's own poller descriptors,
// which the runtime may use on any thread (a garbage collection started on
// this thread polls the network), and nothing the daemon opens later. Each
// run's few descriptors are copied into it just for its fork (pidfd_getfd
// from the daemon's own table) and closed after.
//
// The thread is locked to its goroutine for good and runs nothing else;
// ForkExec's error pipe is read with plain system calls. Where the kernel
// refuses (pidfd_getfd needs Linux 5.6), forks run on the caller's thread
// as before.

type forkReq struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	reply chan forkRes
}

type forkRes struct {
	pid int
	err error
}

var (
	forkerOnce sync.Once
	forkerReqs chan forkReq // nil when there is no forker thread
)

// StartForker sets up the forker thread now. The daemon calls it first
// thing, while its descriptor table is small: the thread's table is a copy
// of it. Later calls (and the first fork, if no one called it) do nothing.
func StartForker() { StartForkerWithout(nil) }

// StartForkerWithout is StartForker for a process that holds descriptors
// already (those an upgrade handed over): they are closed in the thread's
// copy of the table, which must hold none of the daemon's (a run's notify
// socket kept open there would outlive the run).
func StartForkerWithout(fds []int) {
	forkerOnce.Do(func() { startForker(fds) })
}

// forkExec is syscall.ForkExec from the forker thread when there is one:
// attr.Files and attr.Sys.CgroupFD name descriptors of the daemon's table.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	StartForker()
	var pid int
	var err error
	if forkerReqs == nil {
		pid, err = syscall.ForkExec(path, argv, attr)
	} else {
		reply := make(chan forkRes, 1)
		forkerReqs <- forkReq{path: path, argv: argv, attr: attr, reply: reply}
		r := <-reply
		pid, err = r.pid, r.err
	}
	if err == nil {
		restoreLimits(pid)
	}
	return pid, err
}

// restoreLimits gives a run the descriptor limit tend itself was started
// with when tend raised its own for a big fleet (docs/trust.md#limits): Go puts the
// original back in a child only while the process's limit is the one Go
// set at start. The run's first instructions run with the raised limit;
// nothing between fork and exec can be added to syscall.ForkExec.
func restoreLimits(pid int) {
	if lim, apply := limits.ForRuns(); apply {
		_ = unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil)
	}
}

func startForker(without []int) {
	// The runtime's poller must exist before the table is copied: a pipe
	// handed to os makes it (if nothing has yet).
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	ready := make(chan chan forkReq)
	go forker(ready, without)
	forkerReqs = <-ready
}

// forker is the forker thread's goroutine. It sends nil on ready when the
// thread cannot be set up, and then returns (ending the thread).
func forker(ready chan<- chan forkReq, without []int) {
	runtime.LockOSThread() // never unlocked: with a private table, the thread must die with us
	if unix.Gettid() == os.Getpid() {
		// The main thread: its table is the one /proc/PID/fd and
		// pidfd_getfd read, the daemon's own. While this goroutine holds
		// it, another cannot run there: that one is the forker, and this
		// one lets the main thread go once the other has its own thread.
		relay := make(chan chan forkReq)
		go forker(relay, without)
		r := <-relay
		runtime.UnlockOSThread()
		ready <- r
		return
	}
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err == nil {
		err = unix.Unshare(unix.CLONE_FILES)
	}
	if err != nil {
		if self > 0 {
			unix.Close(self)
		}
		ready <- nil
		return
	}
	for _, fd := range without { // in this thread's table only
		unix.Close(fd)
	}
	reqs := make(chan forkReq)
	ready <- reqs
	for req := range reqs {
		pid, err := forkHere(self, req)
		req.reply <- forkRes{pid, err}
	}
}

// forkHere copies the request's descriptors into this thread's table, forks
// and closes the copies.
func forkHere(self int, req forkReq) (int, error) {
	attr := *req.attr
	var copies []int
	defer func() {
		for _, fd := range copies {
			unix.Close(fd)
		}
	}()
	local := func(fd int) (int, error) {
		c, err := unix.PidfdGetfd(self, fd, 0)
		if err != nil {
			return -1, err
		}
		copies = append(copies, c)
		return c, nil
	}
	attr.Files = make([]uintptr, len(req.attr.Files))
	for i, fd := range req.attr.Files {
		c, err := local(int(fd))
		if err != nil {
			return 0, forkerErr(err)
		}
		attr.Files[i] = uintptr(c)
	}
	if sys := req.attr.Sys; sys != nil && sys.UseCgroupFD {
		s := *sys
		c, err := local(sys.CgroupFD)
		if err != nil {
			return 0, forkerErr(err)
		}
		s.CgroupFD = c
		attr.Sys = &s
	}
	return syscall.ForkExec(req.path, req.argv, &attr)
}

// forkerErr keeps a descriptor shortage a descriptor shortage (the
// daemon_resources rule) and names anything else.
func forkerErr(err error) error {
	if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) {
		return err
	}
	return &os.SyscallError{Syscall: "pidfd_getfd", Err: err}
}
