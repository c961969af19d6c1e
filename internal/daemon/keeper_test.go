package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A keeper this daemon did not start (an earlier daemon's, found through
// keeper.pid) that dies is noticed through its pidfd and replaced at once
// by one of this daemon's, handed the adopted run's master
// (docs/terminal.md#a-keeper-that-dies); the run reads on meanwhile.
func TestKeeperOfAnEarlierDaemonIsReplaced(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	conf := `
[program.agent]
shell = '''printf 'first\n'
while [ ! -e ` + gate + ` ]; do sleep 0.05; done
printf 'after the keeper\n'
exec sleep 100000'''
tty = true
`
	c, killUp := upChild(t, dir, conf)
	defer killUp()
	var pid int
	testutil.Eventually(t, "the first daemon's run", func() bool {
		st, err := c.Status("agent:0")
		if err != nil || st.PID == nil {
			return false
		}
		pid = *st.PID
		return strings.Contains(ttyLogs(t, c, "agent:0", false), "first")
	})
	kp := keeperPID(t, dir)
	killUp()
	reapAtEnd(t, pid, kp)

	c2, d, _ := startDaemonSeen(t, dir, conf)
	if st, err := c2.Status("agent:0"); err != nil || st.PID == nil || *st.PID != pid {
		t.Fatalf("not adopted: %+v %v", st, err)
	}
	syscall.Kill(kp, syscall.SIGKILL)
	var now int
	testutil.Eventually(t, "a keeper of this daemon's holding the run's master", func() bool {
		now = liveKeeper(dir)
		return now > 0 && now != kp && holdsMasterOf(now, pid)
	})
	if n := d.keeper.restarts.Load(); n != 1 {
		t.Errorf("%d keepers replaced, want 1", n)
	}
	evs, err := c2.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var replaced *program.DaemonPhase
	for _, e := range evs {
		if ph, ok := e.Data.(*program.DaemonPhase); ok && ph.Phase == program.PhaseKeeperReplaced {
			replaced = ph
		}
	}
	if replaced == nil || replaced.PID != kp || replaced.Keeper != now || replaced.Count == nil || *replaced.Count != 1 {
		t.Errorf("keeper_replaced %+v", replaced)
	}
	os.WriteFile(gate, nil, 0o600)
	waitScreen(t, d, "agent:0", "after the keeper")
}

// liveKeeper is the keeper keeper.pid records, if it lives and serves the
// socket (its descriptor 3); else 0.
func liveKeeper(dir string) int {
	f := strings.Fields(readFile(filepath.Join(dir, ".tend", keeper.PIDFile)))
	if len(f) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	if l, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3"); pid <= 0 || !strings.HasPrefix(l, "socket:") {
		return 0
	}
	return pid
}

// holdsMasterOf says whether process pid holds the master of run's
// terminal (its stdin, /dev/pts/N): a /dev/ptmx descriptor of tty-index N.
func holdsMasterOf(pid, run int) bool {
	slave, _ := os.Readlink("/proc/" + strconv.Itoa(run) + "/fd/0")
	n, ok := strings.CutPrefix(slave, "/dev/pts/")
	if !ok {
		return false
	}
	p := "/proc/" + strconv.Itoa(pid)
	fds, _ := os.ReadDir(p + "/fd")
	for _, fd := range fds {
		if l, _ := os.Readlink(p + "/fd/" + fd.Name()); l != "/dev/ptmx" && l != "/dev/pts/ptmx" {
			continue
		}
		for _, line := range strings.Split(readFile(p+"/fdinfo/"+fd.Name()), "\n") {
			if v, ok := strings.CutPrefix(line, "tty-index:"); ok && strings.TrimSpace(v) == n {
				return true
			}
		}
	}
	return false
}
