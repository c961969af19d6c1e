package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Memory is a process's memory and descriptors at one moment.
type Memory struct {
	PSS     int64          `json:"pss_bytes"`      // shared pages split fairly
	PSSAnon int64          `json:"pss_anon_bytes"` // of which anonymous: the heap, stacks
	RSS     int64          `json:"rss_bytes"`
	Threads int            `json:"threads"`
	FDs     int            `json:"fds"`       // over every descriptor table of the process
	Tables  int            `json:"fd_tables"` // tend's epoll loops and forker have tables of their own
	Kinds   map[string]int `json:"fd_kinds"`  // socket, pipe, ptmx, anon_inode:[...], file
}

// readMemory reads pid's memory (smaps_rollup) and descriptors.
func readMemory(pid int) (Memory, error) {
	var m Memory
	mem, err := measure.ReadMem(pid)
	if err != nil {
		return m, err
	}
	m.PSS, m.RSS, m.PSSAnon = mem.PSS, mem.RSS, mem.PSSAnon
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	m.Threads = len(tasks)
	m.Kinds = map[string]int{}
	seen := map[string]bool{}
	for _, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/fd", pid, t.Name())
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		var key strings.Builder
		var targets []string
		for _, fd := range fds {
			target, err := os.Readlink(dir + "/" + fd.Name())
			if err == nil {
				targets = append(targets, target)
				key.WriteString(fd.Name() + "=" + target + "\n")
			}
		}
		if seen[key.String()] {
			continue // a table shared with another thread
		}
		seen[key.String()] = true
		m.Tables++
		m.FDs += len(targets)
		for _, target := range targets {
			m.Kinds[fdKind(target)]++
		}
	}
	return m, nil
}

func fdKind(target string) string {
	switch {
	case strings.HasPrefix(target, "socket:"):
		return "socket"
	case strings.HasPrefix(target, "pipe:"):
		return "pipe"
	case target == "/dev/ptmx" || strings.HasPrefix(target, "/dev/pts/"):
		return "ptmx"
	case strings.HasPrefix(target, "anon_inode:"):
		return target
	case strings.Contains(target, "/fifo/"):
		return "fifo"
	}
	return "file"
}

// cpuTime is a process's CPU time so far: schedstat's run time summed over
// its threads.
func cpuTime(pid int) time.Duration {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var run time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			run += time.Duration(ns)
		}
	}
	return run
}

// keeperOf is the pid of the tend-keeper serving the state directory dir:
// the one its daemon recorded in dir/keeper.pid, while it lives (its
// socket is bound through the directory's descriptor, so /proc/net/unix
// does not name it by dir); 0 if none.
func keeperOf(dir string) int {
	b, err := os.ReadFile(dir + "/keeper.pid")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0
	}
	if l, _ := os.Readlink("/proc/" + f[0] + "/fd/3"); !strings.HasPrefix(l, "socket:") {
		return 0
	}
	return pid
}

// procCPU is a process's utime+stime from /proc/PID/stat (its threads'
// together, those that have exited included), or 0 if it is gone or pid
// is 0.
func procCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * measure.Tick
}

// procState is a process's state letter (R, S, Z...), or 0 if it is gone.
func procState(pid int) byte {
	if f := statFields(pid); len(f) > 0 && f[0] != "" {
		return f[0][0]
	}
	return 0
}

// statFields are the fields of /proc/PID/stat after PID (COMM), whatever
// COMM holds: the state first, utime and stime 12th and 13th; nil if the
// process is gone or pid is 0.
func statFields(pid int) []string {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}
