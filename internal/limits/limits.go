// Package limits sets up what the daemon inherits from whoever started it
// (docs/trust.md): descriptors it was handed are made close-on-exec, so none of
// them leaks into a run, and its RLIMIT_NOFILE is raised to what the fleet
// needs, while runs keep the limit tend itself was started with.
//
// Go (1.21 and later; checked in 1.26's syscall/rlimit.go and
// exec_linux.go) raises the soft RLIMIT_NOFILE to the hard limit minus one
// when a program starts, and syscall.ForkExec puts the original back in
// each child, but only while the limit is still exactly what Go set: any
// syscall.Setrlimit of RLIMIT_NOFILE (x/sys/unix's calls it), even a failed
// one, and any successful Prlimit of the own process, turns that off for
// good, and every child then inherits the raised limit. So Raise changes
// the limit only when it must (the fleet needs more than Go already gave),
// through Prlimit, and then ForRuns reports the limit the spawn path has
// to set in each run itself. That limit is learnt from a child (Go keeps
// it where only its own ForkExec reads it), run through the daemon's
// reaper, which stays the one waiter for children.
package limits

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
)

// CloseOnExecInherited marks every descriptor above 2 close-on-exec: with
// close_range(CLOSE_RANGE_CLOEXEC) where the kernel has it (5.11+), else one
// by one from /proc/self/fd. Call it first thing: what the daemon opens
// itself is close-on-exec already, and a run's stdio is passed explicitly.
func CloseOnExecInherited() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	return cloexecFromProc()
}

// cloexecFromProc is CloseOnExecInherited without close_range.
func cloexecFromProc() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("descriptors: %w", err)
	}
	var errs []error
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		if flags&unix.FD_CLOEXEC == 0 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
				errs = append(errs, fmt.Errorf("fd %d: %w", fd, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("descriptors: %w", err)
	}
	return nil
}

// Need estimates the descriptors a fleet of n instances needs in the
// daemon's own table: at most one a run (an adopted run's pidfd, a max_rss
// run's memory.current) and some for the daemon. A run's notify socket and
// output pipes (three) live in the reader loops' tables (internal/epoll),
// each a table of its own under the limit by itself, as many as the fleet
// needs.
func Need(instances int) uint64 { return uint64(max(instances, 0)) + 64 }

// Result is what Raise did.
type Result struct {
	Need    uint64      // descriptors the fleet needs
	Before  unix.Rlimit // the limit when Raise was called
	After   unix.Rlimit // the limit now
	Changed bool        // Raise changed it
}

// Short reports whether the fleet still does not fit.
func (r Result) Short() bool { return r.After.Cur < r.Need }

// Advice is the one line that says the fleet does not fit and how to make
// it fit; "" when it fits.
func (r Result) Advice() string {
	if !r.Short() {
		return ""
	}
	if n := nrOpen(); r.Need > n {
		return fmt.Sprintf("the fleet needs about %d descriptors (1 per instance + 64 in its own table) but the limit is %d and the kernel allows at most %d (fs.nr_open); raise that with sysctl -w fs.nr_open=%d, then the limit with `ulimit -n %d` or LimitNOFILE=%d in tend's systemd unit", r.Need, r.After.Cur, n, r.Need, r.Need, r.Need)
	}
	return fmt.Sprintf("the fleet needs about %d descriptors (1 per instance + 64 in its own table) but the limit is %d; raise it with `ulimit -n %d` before tend up, or LimitNOFILE=%d in tend's systemd unit", r.Need, r.After.Cur, r.Need, r.Need)
}

// Raise makes room for need descriptors: the soft RLIMIT_NOFILE up to the
// hard limit, and as root (with CAP_SYS_RESOURCE) both up to need, at most
// fs.nr_open, as nginx and HAProxy do. It never lowers a limit, and leaves
// it as it is when the fleet fits (or cannot be made to fit). Before the
// first change it records the limit runs must get (ForRuns), which may
// take a child: r, started, runs it (the reaper is the one waiter for
// children).
func Raise(need uint64, r *reaper.Reaper) (Result, error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		return Result{Need: need}, fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	res := Result{Need: need, Before: cur, After: cur}
	if cur.Max == 0 {
		return res, nil
	}
	// Go has set the soft limit to the hard one minus one (see the package
	// doc); taking that last descriptor too would cost every run its
	// original limit, so it is taken only when it makes the fleet fit.
	soft := cur
	if cur.Cur < cur.Max-1 || (need > cur.Cur && need <= cur.Max) {
		soft.Cur = cur.Max
	}
	want := soft
	if os.Geteuid() == 0 && need > cur.Max {
		n := max(cur.Max, min(need, nrOpen()))
		want = unix.Rlimit{Cur: n, Max: n}
	}
	for _, try := range []unix.Rlimit{want, soft} {
		if try == cur {
			return res, nil
		}
		captureOriginal(cur, r)
		// Prlimit on the own process, unlike Setrlimit, leaves Go's
		// restore in children alone when it fails.
		err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &try, nil)
		if err == nil {
			markChanged()
			res.After, res.Changed = try, true
			return res, nil
		}
		if err != unix.EPERM || try == soft {
			return res, fmt.Errorf("raising RLIMIT_NOFILE to %d: %w", try.Cur, err)
		}
		// Root without CAP_SYS_RESOURCE (a container): the hard limit
		// stays; the soft one may still go up to it.
	}
	return res, nil
}

var (
	origMu   sync.Mutex
	orig     unix.Rlimit // the limit runs get; guarded by origMu
	captured bool        // orig is set; guarded by origMu
	changed  bool        // tend has changed its own limit; guarded by origMu
)

// ForRuns returns the RLIMIT_NOFILE runs must get: the one tend was started
// with. apply is true once tend has changed its own limit: then
// syscall.ForkExec no longer restores the original in children, and the
// spawn path must set lim in each run itself (prlimit(pid, ...) on the
// new child). While apply is false, Go's own restore does it.
func ForRuns() (lim unix.Rlimit, apply bool) {
	origMu.Lock()
	defer origMu.Unlock()
	return orig, changed
}

// captureOriginal records, once, the limit tend was started with, before
// its first change. cur is the limit now: when Go raised the soft limit at
// start (it is then the hard limit minus one), the original soft limit is
// found in a child, where syscall.ForkExec has just put it back: Go keeps
// it nowhere else a program can read.
func captureOriginal(cur unix.Rlimit, r *reaper.Reaper) {
	origMu.Lock()
	defer origMu.Unlock()
	if captured {
		return
	}
	orig, captured = cur, true
	if cur.Max > 0 && cur.Cur == cur.Max-1 {
		if soft, err := childSoftLimit(r); err == nil && soft <= cur.Cur {
			orig.Cur = soft
		}
	}
}

// markChanged records that tend changed its own limit.
func markChanged() {
	origMu.Lock()
	defer origMu.Unlock()
	changed = true
}

// childSoftLimit asks a child shell for its soft RLIMIT_NOFILE. The child
// is r's, like every child of the daemon: its exit comes through the
// reaper's drain, never a wait of this package's own.
func childSoftLimit(r *reaper.Reaper) (uint64, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		return 0, err
	}
	defer null.Close()
	st, err := r.Run(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "ulimit -Sn"}, &syscall.ProcAttr{
			Env:   []string{"PATH=/usr/bin:/bin"},
			Files: []uintptr{null.Fd(), pw.Fd(), null.Fd()},
		})
	})
	pw.Close() // after the exit: what the child wrote waits in the pipe
	if err != nil {
		return 0, err
	}
	out, rerr := bufio.NewReader(pr).ReadString('\n')
	if rerr != nil || !st.Wait.Exited() || st.Wait.ExitStatus() != 0 {
		return 0, fmt.Errorf("sh -c 'ulimit -Sn': %q %v", out, st.Wait)
	}
	out = strings.TrimSpace(out)
	if out == "unlimited" {
		return unix.RLIM_INFINITY, nil
	}
	return strconv.ParseUint(out, 10, 64)
}

// nrOpen is fs.nr_open, the most any process may have open: the ceiling
// for a hard limit.
func nrOpen() uint64 {
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return 1 << 20 // the kernel's default
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 1 << 20
	}
	return n
}

// Original is the limit runs must get (ForRuns's), found now if tend has
// not needed it yet: for handing it to the program this process becomes
// when it re-executes itself (tend upgrade). That program starts with the
// limit raised (by Go's runtime, if not by tend), and Go's restore in its
// children would give runs the raised one; the one tend was started with
// is found nowhere else. r must be running (a child may be asked).
func Original(r *reaper.Reaper) unix.Rlimit {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err == nil {
		captureOriginal(cur, r)
	}
	origMu.Lock()
	defer origMu.Unlock()
	return orig
}

// Inherit takes up Original from the program this process was before it
// re-executed itself: runs get lim, set by the spawn path (ForRuns).
func Inherit(lim unix.Rlimit) {
	origMu.Lock()
	defer origMu.Unlock()
	if lim.Max == 0 {
		return // none found: Go's own restore is the best left
	}
	orig, captured, changed = lim, true, true
}
