package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/program"
)

// With cgroups and the memory controller, the max_rss watchdog reads one
// memory.current per instance a second (cgroup.Group.MemoryCurrent: a
// pread of a descriptor kept open) instead of walking the run's tree.
// Where the memory controller cannot be had (this machine binds it to a
// v1 hierarchy), the daemon's groups have no memory.current; the sweep
// then reads a file of the same shape in each group, a single number
// formatted by kernfs: cgroup.freeze.
const (
	memoryFile = "memory.current"
	shapedFile = "cgroup.freeze"
)

// notMeasuredReads says what the sweep of a shaped file leaves out.
const notMeasuredReads = "memory.current itself (no memory controller can be delegated here: it is bound to a cgroup v1 hierarchy), " +
	"the daemon's watchdog loop on that path (its wake-up, the per-instance bookkeeping), and the memory controller's " +
	"charging of the runs' pages; the daemon's idle CPU with max_rss here is its fallback that reads each group's members"

// measureReads sweeps the memory file of every running instance's group
// sweeps times, from one locked thread, timing each sweep's CPU and wall
// time. The groups are found from the instances' pids.
func measureReads(d *daemon, sweeps int, tracking string) (*MemoryReads, error) {
	res := &MemoryReads{}
	if tracking != program.TrackingCgroup {
		res.NotMeasured = "the fleet's runs have no cgroups (tracking " + tracking + ")"
		return res, nil
	}
	list, err := d.client.List(false)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, st := range list {
		if st.PID == nil {
			continue
		}
		dir, err := measure.CgroupDir(strconv.Itoa(*st.PID))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.ID, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return nil, errors.New("no running instance to find a group from")
	}
	res.File = shapedFile
	if _, err := os.Stat(filepath.Join(dirs[0], memoryFile)); err == nil {
		res.File = memoryFile
	} else {
		res.NotMeasured = notMeasuredReads
	}
	fds := make([]int, 0, len(dirs))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, dir := range dirs {
		fd, err := unix.Open(filepath.Join(dir, res.File), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, res.File), err)
		}
		fds = append(fds, fd)
	}
	res.Groups = len(fds)

	runtime.LockOSThread() // the thread's CPU clock counts this goroutine's work alone
	defer runtime.UnlockOSThread()
	var buf [64]byte
	for i := range 1 + sweeps {
		c0, t0 := threadCPU(), time.Now()
		for _, fd := range fds {
			n, err := unix.Pread(fd, buf[:], 0)
			for err == unix.EINTR {
				n, err = unix.Pread(fd, buf[:], 0)
			}
			if err != nil {
				return nil, fmt.Errorf("pread %s: %w", res.File, err)
			}
			if _, err := parseNumber(buf[:n]); err != nil {
				return nil, err
			}
		}
		c1, t1 := threadCPU(), time.Now()
		if i > 0 { // the first sweep warms the dentries and pages
			res.CPU = append(res.CPU, measure.NewMs(c1-c0))
			res.Wall = append(res.Wall, measure.NewMs(t1.Sub(t0)))
		}
	}
	return res, nil
}

// parseNumber reads "123\n" (or "max\n") as the watchdog parses memory.current.
func parseNumber(b []byte) (int64, error) {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if string(b) == "max" {
		return -1, nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// threadCPU is this thread's CPU time, to the nanosecond (getrusage's
// split into user and system time comes in ticks).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
