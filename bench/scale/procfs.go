package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// readMemory reads pid's PSS and RSS (shared pages split fairly, and counted
// whole), its threads and its open descriptors by kind.
func readMemory(pid int) (Memory, error) {
	var m Memory
	mem, err := measure.ReadMem(pid)
	if err != nil {
		return m, err
	}
	m.PSS, m.RSS, m.PSSAnon = mem.PSS, mem.RSS, mem.PSSAnon
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	m.Threads = len(tasks)
	m.FDs, m.FDKinds, m.FDTables, m.FDLargest = readFDs(pid)
	return m, nil
}

// readFDs counts pid's open descriptors by what they are: socket, pipe,
// anon_inode:[eventpoll] and such, or "file" (a path: log files, FIFOs,
// directories, cgroup files). It counts every descriptor table of the
// process, not only /proc/PID/fd: tend's epoll loops and forker keep theirs in
// private tables (unshare CLONE_FILES), which /proc/PID/fd does not show.
// Threads that share a table list the same entries, so a table is known by
// its listing. It returns the total over the distinct tables, their number
// and the largest (RLIMIT_NOFILE bounds each table, not the sum).
func readFDs(pid int) (total int, kinds map[string]int, tables, largest int) {
	kinds = map[string]int{}
	seen := map[string]bool{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/fd", pid, t.Name())
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		targets := make([]string, 0, len(fds))
		var key strings.Builder
		for _, fd := range fds {
			target, err := os.Readlink(dir + "/" + fd.Name())
			if err != nil {
				continue
			}
			targets = append(targets, target)
			key.WriteString(fd.Name() + "=" + target + "\n")
		}
		if seen[key.String()] {
			continue
		}
		seen[key.String()] = true
		tables++
		total += len(targets)
		largest = max(largest, len(targets))
		for _, target := range targets {
			kinds[fdKind(target)]++
		}
	}
	return total, kinds, tables, largest
}

// fdKind names what a descriptor's /proc link points at.
func fdKind(target string) string {
	switch {
	case strings.HasPrefix(target, "socket:"):
		return "socket"
	case strings.HasPrefix(target, "pipe:"):
		return "pipe"
	case strings.HasPrefix(target, "anon_inode:"):
		return target
	case strings.HasPrefix(target, "/sys/fs/cgroup"):
		return "cgroup file"
	case strings.HasSuffix(target, ".log") || strings.Contains(target, "/logs/"):
		return "log file"
	case strings.Contains(target, "/fifo/"):
		return "fifo"
	}
	return "file"
}

// cpu is a process's CPU use so far.
type cpu struct {
	at      time.Time
	run     time.Duration // schedstat run time summed over live threads (ns precision)
	wakeups int64         // schedstat timeslices summed over live threads
	ticks   time.Duration // utime+stime from /proc/PID/stat (10 ms steps, exited threads included)
}

// readCPU reads pid's CPU time two ways: schedstat is precise but forgets
// threads that exited; stat keeps them but counts in 10 ms ticks.
func readCPU(pid int) (cpu, error) {
	c := cpu{at: time.Now()}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return c, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		n, _ := strconv.ParseInt(f[2], 10, 64)
		c.run += time.Duration(ns)
		c.wakeups += n
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return c, err
	}
	// Fields after the command (which may hold spaces) start at state.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return c, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	c.ticks = time.Duration(ut+st) * measure.Tick
	return c, nil
}

// usage is a point in time for a daemon's CPU and the machine's.
type usage struct {
	daemon cpu
	self   time.Duration // this process's CPU, children excluded
	busy   time.Duration // every CPU's non-idle time, steal included; -1 unknown
}

func sampleUsage(pid int) (usage, error) {
	c, err := readCPU(pid)
	return usage{daemon: c, self: rusageSelf(), busy: measure.MachineBusy()}, err
}

// since is the window from u to now.
func (u usage) since(pid int) (CPUWindow, error) {
	now, err := sampleUsage(pid)
	if err != nil {
		return CPUWindow{}, err
	}
	elapsed := now.daemon.at.Sub(u.daemon.at)
	run := now.daemon.run - u.daemon.run
	w := CPUWindow{
		Elapsed: measure.NewMs(elapsed),
		Run:     measure.NewMs(run),
		Wakeups: now.daemon.wakeups - u.daemon.wakeups,
		Ticks:   measure.NewMs(now.daemon.ticks - u.daemon.ticks),
		Others:  -1,
	}
	if u.busy >= 0 && now.busy >= 0 && elapsed > 0 {
		others := (now.busy - u.busy) - run - (now.self - u.self)
		w.Others = max(float64(others)/float64(elapsed), 0)
	}
	return w, nil
}

func rusageSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
