package reaper

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Adopt takes over a run that an earlier daemon started: it is not our
// child, so its exit comes through a pidfd instead of wait4 and its status
// cannot be read (the Status has Adopted set). The run must still be the
// process that was recorded: its start time (in clock ticks since boot,
// /proc/PID/stat field 22) must match, checked again once the pidfd is held,
// so a reused pid is never adopted and never signalled.
func (r *Reaper) Adopt(pid int, startTicks uint64, owner Owner) error {
	if ticks, err := StartTicks(pid); err != nil || ticks != startTicks {
		return fmt.Errorf("pid %d is not the recorded run (%v)", pid, errOr(err, "start time differs"))
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	if ticks, err := StartTicks(pid); err != nil || ticks != startTicks {
		unix.Close(fd)
		return fmt.Errorf("pid %d ended or was reused while being adopted", pid)
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)) // non-blocking: the netpoller watches it
	r.mu.Lock()
	// killGroup: when the run is our child after all (tend's subreaper
	// ancestry brought it here), the drain ends its group as for any run.
	r.routes[pid] = route{owner: owner, pidfd: pidfd, pidfdN: fd, startTicks: startTicks, killGroup: true}
	r.mu.Unlock()
	go r.watch(pid, pidfd)
	return nil
}

// watch waits until the adopted run's pidfd says it has exited, then routes
// the exit like the drain does for a child.
func (r *Reaper) watch(pid int, pidfd *os.File) {
	if rc, err := pidfd.SyscallConn(); err == nil {
		_ = rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0 || (err != nil && err != unix.EINTR)
		})
	}
	now := time.Now()
	r.mu.Lock()
	for r.paused { // an upgrade is handing over: the next daemon adopts the run again
		c := r.unpause
		r.mu.Unlock()
		<-c
		r.mu.Lock()
	}
	rt, ok := r.routes[pid]
	if ok && rt.pidfd == pidfd {
		delete(r.routes, pid)
		killAdoptedGroup(pid, rt.startTicks)
	}
	r.mu.Unlock()
	pidfd.Close()
	if ok && rt.pidfd == pidfd {
		rt.owner(Status{PID: pid, Adopted: true, At: now, Woke: now})
	}
}

// killAdoptedGroup ends what is left of an adopted run's process group once
// its leader has exited, as the drain does for a child's run. The kernel
// keeps a pid number allocated while any process uses it as its group id,
// so while members are left this reaches only them. Once they are all gone
// the number may be reused: a process now holding it under another start
// time is a stranger, and is left alone.
func killAdoptedGroup(pid int, startTicks uint64) {
	if ticks, err := StartTicks(pid); err == nil && ticks != startTicks {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// signalAdoptedLocked signals an adopted run: the pidfd proves the leader is
// still the recorded process, and while it lives its pid (the group id)
// cannot be reused.
// (pidfd is the raw descriptor: File.Fd would take it off the netpoller.)
func signalAdoptedLocked(pid, pidfd int, sig syscall.Signal, group bool) error {
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return ErrGone
	}
	if group {
		if err := syscall.Kill(-pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return unix.PidfdSendSignal(pidfd, sig, nil, 0)
}

// StartTicks is when pid started, in clock ticks since boot (field 22 of
// /proc/PID/stat): with the pid, it names one process for good.
func StartTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("malformed /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the comm
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
