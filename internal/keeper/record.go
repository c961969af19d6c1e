package keeper

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
)

// PIDFile is the record, in the state directory, of the keeper a daemon
// started: "PID TICKS MAKER", TICKS its start time (/proc/PID/stat field
// 22), so that a pid used again names nothing, and MAKER the daemon that
// made its listening socket. The next daemon talks to no other: the kernel
// names as the socket's peer the keeper once it has listened again, the
// daemon that made the socket until then (a keeper slow to start when its
// daemon was killed).
const PIDFile = "keeper.pid"

// Record notes in d that the keeper is pid, on a socket this process made.
func Record(d *statedir.Dir, pid int) error {
	ticks, err := reaper.StartTicks(pid)
	if err != nil {
		return fmt.Errorf("keeper: pid %d: %w", pid, err)
	}
	data := fmt.Sprintf("%d %d %d\n", pid, ticks, os.Getpid())
	return d.WriteFileAtomic(PIDFile, []byte(data), 0o600, false)
}

// Recorded is what d records of the keeper, while it lives (with the start
// time recorded): its pid and that of the daemon that made its socket.
// Nothing when there is no such keeper.
func Recorded(d *statedir.Dir) []int {
	b, err := d.ReadFile(PIDFile)
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return nil
	}
	pid, err1 := strconv.Atoi(f[0])
	ticks, err2 := strconv.ParseUint(f[1], 10, 64)
	maker, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 || maker <= 0 {
		return nil
	}
	if now, err := reaper.StartTicks(pid); err != nil || now != ticks {
		return nil
	}
	return []int{pid, maker}
}
