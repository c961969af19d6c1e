//go:build soak

package soak

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

// proc is what /proc/PID/stat says of one process.
type proc struct {
	pid, ppid, pgrp int
	state           byte   // R, S, Z, ...
	start           uint64 // start time in clock ticks since boot: with pid, names the process for good
	comm            string
}

// readProc reads /proc/PID/stat. An error means the process is gone.
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	p := proc{pid: pid, state: f[0][0], comm: s[open+1 : end]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgrp, _ = strconv.Atoi(f[2])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, nil
}

// allProcs reads every process of the machine. Processes that end while it
// reads are simply missing.
func allProcs() []proc {
	ents, _ := os.ReadDir("/proc")
	out := make([]proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// descendants are the processes below root, from one reading of /proc.
func descendants(root int, procs []proc) []proc {
	kids := map[int][]proc{}
	for _, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		for _, k := range kids[queue[0]] {
			out = append(out, k)
			queue = append(queue, k.pid)
		}
		queue = queue[1:]
	}
	return out
}

// cmdline is a process's command line for messages ("" once it is gone).
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// describe is one line about a process for a failure message.
func describe(p proc) string {
	return fmt.Sprintf("pid %d ppid %d pgrp %d state %c %q", p.pid, p.ppid, p.pgrp, p.state, cmdline(p.pid))
}

// rss is a process's resident set (VmRSS) in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// minRSS is the least of n samples of pid's RSS taken every second: the
// level the daemon settles at, without the peak of a GC cycle in progress.
func minRSS(pid, n int) (int64, error) {
	var low int64
	for i := range n {
		if i > 0 {
			time.Sleep(time.Second)
		}
		v, err := rss(pid)
		if err != nil {
			return 0, err
		}
		if i == 0 || v < low {
			low = v
		}
	}
	return low, nil
}

// errNotARun is a kill target that is no longer one of the fleet's runs.
var errNotARun = errors.New("not a run of the fleet any more")

// killRun sends SIGKILL to pid if it is still a run of the fleet: the
// leader of its own process group, a child of the daemon (or of this
// process, for a run adopted after the daemon's SIGKILL). The check goes
// through a pidfd opened first, so a pid that ends and is reused meanwhile
// (pid_max may be 32768, and other tests fork on this machine) is never
// signalled: the pidfd still names the process that was checked.
func killRun(pid, daemonPID int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errNotARun
	}
	defer unix.Close(fd)
	p, err := readProc(pid)
	if err != nil || p.pgrp != pid || p.state == 'Z' || (p.ppid != daemonPID && p.ppid != os.Getpid()) {
		return errNotARun
	}
	if err := unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0); err != nil {
		return errNotARun
	}
	return nil
}

// killDescendant sends SIGKILL to p if it is still that process (same
// start time, same parent): cleanup of what a failed test leaves.
func killDescendant(p proc) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if q, err := readProc(p.pid); err == nil && q.start == p.start && q.ppid == p.ppid {
		_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
	}
}
