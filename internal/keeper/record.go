package keeper

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
)

// PIDFile is the record, in the state directory, of the keeper a daemon
// started: "PID TICKS", TICKS its start time (/proc/PID/stat field 22),
// so that the next daemon knows which process is tend's keeper, and a
// pid used again names nothing.
const PIDFile = "keeper.pid"

// Record notes in d that the keeper is pid.
func Record(d *statedir.Dir, pid int) error {
	ticks, err := reaper.StartTicks(pid)
	if err != nil {
		return fmt.Errorf("keeper: pid %d: %w", pid, err)
	}
	data := strconv.Itoa(pid) + " " + strconv.FormatUint(ticks, 10) + "\n"
	return d.WriteFileAtomic(PIDFile, []byte(data), 0o600, false)
}

// Recorded is the pid of the keeper d records, while that process lives
// (with the start time recorded); 0 when there is none.
func Recorded(d *statedir.Dir) int {
	b, err := d.ReadFile(PIDFile)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, err1 := strconv.Atoi(f[0])
	ticks, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0
	}
	if now, err := reaper.StartTicks(pid); err != nil || now != ticks {
		return 0
	}
	return pid
}
