package limits

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Pseudo-terminals. Every run of a program with tty = true holds one pty
// pair for as long as it runs, and the kernel caps the pairs of the whole
// machine at kernel.pty.max (4,096 by default; in a container's own devpts,
// kernel.pty.reserve of them, 1,024 by default, are kept for the host's).
// Past the cap opening /dev/ptmx fails with ENOSPC and tty runs fail to
// start one by one, so the daemon says so before it starts the fleet and
// names the limit when a pty cannot be had (docs/terminal.md#how-many).

// PTYs is the machine's count of pseudo-terminals: its limit and how many
// are in use now (kernel.pty.max and kernel.pty.nr).
type PTYs struct {
	Max, InUse int
}

// ReadPTYs reads the pty counts from /proc/sys/kernel/pty.
func ReadPTYs() (PTYs, error) {
	m, err := readInt("/proc/sys/kernel/pty/max")
	if err != nil {
		return PTYs{}, err
	}
	n, err := readInt("/proc/sys/kernel/pty/nr")
	if err != nil {
		return PTYs{}, err
	}
	return PTYs{Max: m, InUse: n}, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Advice is the one line that says a fleet of ttys tty instances does not
// fit under the limit, and how to make it fit; "" when it fits. Runs that
// are up already count in InUse, so only a fleet larger than the limit
// itself is certain not to fit; one that nearly fills it (90 %) is warned
// about too, since every terminal on the machine (ssh logins, tmux panes)
// takes from the same pool.
func (p PTYs) Advice(ttys int) string {
	if p.Max <= 0 || ttys <= 0 {
		return ""
	}
	fix := fmt.Sprintf("raise it with sysctl -w kernel.pty.max=%d (or kernel.pty.max in /etc/sysctl.d/)", roundUp(ttys+ttys/4+p.reserveHint()))
	switch {
	case ttys > p.Max:
		return fmt.Sprintf("the fleet has %d tty instances but the kernel allows %d pseudo-terminals in all (kernel.pty.max): runs past that fail to start; %s", ttys, p.Max, fix)
	case ttys*10 >= p.Max*9:
		return fmt.Sprintf("the fleet's %d tty instances nearly fill the kernel's %d pseudo-terminals (kernel.pty.max; %d in use now, every login and tmux pane counts): %s", ttys, p.Max, p.InUse, fix)
	}
	return ""
}

// InUseAdvice is the doctor's line while the machine's ptys are nearly all
// taken (90 %), "" otherwise.
func (p PTYs) InUseAdvice() string {
	if p.Max <= 0 || p.InUse*10 < p.Max*9 {
		return ""
	}
	return fmt.Sprintf("%d of the kernel's %d pseudo-terminals are in use (kernel.pty.nr of kernel.pty.max): tty runs fail to start once none is left; raise it with sysctl -w kernel.pty.max=%d", p.InUse, p.Max, roundUp(p.Max*2))
}

// Exhausted is the why of a pty that could not be opened for want of
// one (ENOSPC from /dev/ptmx).
func (p PTYs) Exhausted() string {
	return fmt.Sprintf("no pseudo-terminal left: %d of %d in use (kernel.pty.max); raise it with sysctl -w kernel.pty.max=%d", p.InUse, p.Max, roundUp(p.Max*2))
}

// reserveHint is the room a container's devpts cannot use
// (kernel.pty.reserve, 1,024 by default), counted in the suggested limit.
func (p PTYs) reserveHint() int {
	if n, err := readInt("/proc/sys/kernel/pty/reserve"); err == nil && n > 0 {
		return n
	}
	return 0
}

// roundUp rounds n up to a multiple of 1,024, for a limit a person types.
func roundUp(n int) int { return (n + 1023) / 1024 * 1024 }
