package runs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// When runs.json and its journal are lost or damaged, a run still alive
// may have no record. What else names it (docs/daemon.md#damaged-records):
//
//   - with cgroups, its instance's group (…/tend-ID/NAME-K) lists every
//     process of the run: the kernel's word, nothing to guess;
//   - without, its output FIFOs (state_dir/fifo/NAME-K.out, .err): the run
//     and what it started hold them open as stdout and stderr, and no
//     process outside this state directory's runs has a reason to.
//
// Either gives a set of processes; Leader picks the run's own among them.
// A run that writes to neither (a terminal agent's, held by the keeper,
// or one that closed its stdout and stderr) cannot be found this way.

// Proc is a process as /proc/PID/stat tells it.
type Proc struct {
	PID        int
	PPID       int
	StartTicks uint64 // field 22: with the pid, names the process for good
}

// ReadProc reads /proc/PID/stat.
func ReadProc(pid int) (Proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, err
	}
	return parseStat(pid, b)
}

var errStat = errors.New("malformed /proc stat")

// parseStat reads the parent (field 4) and start time (field 22) of a
// /proc/PID/stat line; the command, field 2, may hold spaces and parens.
func parseStat(pid int, b []byte) (Proc, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Proc{}, errStat
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return Proc{}, errStat
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return Proc{}, errStat
	}
	ticks, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return Proc{}, errStat
	}
	return Proc{PID: pid, PPID: ppid, StartTicks: ticks}, nil
}

// Leader picks the run's own process among the processes of one run: the
// one whose parent is not among them (the others descend from it). Of
// several such (a process that detached itself, reparented to init or a
// subreaper), the oldest, which started the others; equal start times go
// to the lower pid. False for no processes.
func Leader(procs []Proc) (Proc, bool) {
	in := make(map[int]bool, len(procs))
	for _, p := range procs {
		in[p.PID] = true
	}
	var best Proc
	found := false
	for _, p := range procs {
		if in[p.PPID] {
			continue
		}
		if !found || p.StartTicks < best.StartTicks || p.StartTicks == best.StartTicks && p.PID < best.PID {
			best, found = p, true
		}
	}
	return best, found
}

// ReadProcs reads the processes of pids that still exist.
func ReadProcs(pids []int) []Proc {
	out := make([]Proc, 0, len(pids))
	for _, pid := range pids {
		if p, err := ReadProc(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// userHZ is the unit of /proc's start times: USER_HZ, 100 on every Linux
// the kernel's ABI allows (sysconf(_SC_CLK_TCK)).
const userHZ = 100

var bootOnce = sync.OnceValue(func() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(ts.Nano()))
})

// StartedAt is when a process that started ticks after boot started, as
// a wall time (to a tick: a found run's started_at, which no record kept).
func StartedAt(ticks uint64) time.Time {
	boot := bootOnce()
	if boot.IsZero() {
		return time.Now()
	}
	return boot.Add(time.Duration(ticks) * time.Second / userHZ)
}

// Holders returns, for each path in paths, the processes (other than
// this one) that hold it open: every descriptor of every process in
// /proc is read, so it is called only when a run may be missing.
// Processes that cannot be read (gone, or another user's to a tend that
// is not root) are skipped.
func Holders(paths map[string]bool) map[string][]int {
	out := map[string][]int{}
	if len(paths) == 0 {
		return out
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, fd := range fds {
			target, err := os.Readlink(dir + fd.Name())
			if err != nil || !paths[target] || seen[target] {
				continue
			}
			seen[target] = true
			out[target] = append(out[target], pid)
		}
	}
	return out
}
