// Package initproc is `tend init -- CMD ARGS…`: a correct PID 1 for a
// container (the tini job). It starts one command in its own process group,
// forwards signals to that group, reaps every orphan that is reparented to
// it, and exits with the command's status.
//
// Reaping goes through reaper.Reaper like everywhere else in tend: as PID 1
// every orphan in the container comes to us, and outside a PID namespace the
// reaper makes us a child subreaper so the command's orphans still do.
//
// Which signals are forwarded. Every signal Go's os/signal can catch, sent
// to the command's process group (to its pid if the group is already gone),
// with these exceptions:
//   - SIGKILL, SIGSTOP: cannot be caught.
//   - SIGCHLD: ours; it wakes the reaper.
//   - SIGURG: the Go runtime sends it to its own threads to preempt
//     goroutines, so a catcher sees a stream of them that no one outside
//     sent. Forwarding would flood the command with spurious SIGURGs.
//   - SIGPROF, 32, 33, 34: the runtime owns these (its profiler, its
//     per-thread syscalls, glibc's and musl's internal signals) and
//     signal.Notify cannot catch them: SIGPROF and 33 are swallowed, 32 and
//     34 keep their default action (fatal to tend unless it is PID 1, which
//     the kernel spares). Realtime signals 35..64 are forwarded.
//   - SIGTTIN, SIGTTOU: the terminal sends them to whoever touches it from
//     a background group, which after the hand-over below is tend itself.
//     Forwarding them would stop the command for tend's own write, and
//     catching SIGTTOU turns such a write into a restart loop. They are
//     ignored instead, as tini does. SIGTSTP is forwarded.
//
// Catching a signal also keeps its default action off tend: SIGPIPE, SIGHUP,
// SIGINT, SIGTERM, SIGQUIT no longer kill it, and SIGTSTP no longer stops
// it. Genuine faults (SIGSEGV from a bad access) still crash tend; only a
// SIGSEGV sent with kill(2) is forwarded.
//
// The terminal. When stdin is tend's controlling terminal and tend's group
// is in its foreground, the command's group is made the foreground group, so
// an interactive command (docker run -it … tend init -- bash) can read the
// terminal and gets ^C directly; tend takes the terminal back when done.
//
// When the command exits, whatever is left of its process group gets
// SIGTERM (and SIGCONT, so a stopped member can act on it), then SIGKILL
// after StopGrace; tend waits for the group to empty and returns the
// command's status. Processes that left the group (setsid daemons) are not
// chased: as PID 1, the kernel kills them when tend exits.
package initproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/reaper"
)

// StopGrace is how long the command's leftover group has between SIGTERM
// and SIGKILL, and again between SIGKILL and giving up on it.
const StopGrace = 2 * time.Second

// Exit statuses for a command that could not be started, as a shell uses them.
const (
	ExitNotFound   = 127 // no such file (ENOENT, ENOTDIR), not on PATH
	ExitCannotExec = 126 // found but could not be executed (EACCES, ENOEXEC, …)
	ExitUsage      = 2   // no command given
)

// pollGroup is how often the leftover group is checked for being empty:
// orphans are reaped without telling anyone, so there is nothing to wait on.
const pollGroup = 20 * time.Millisecond

// Run starts argv as the child (its own process group via Setpgid,
// stdin/stdout/stderr inherited from tend, environment inherited), forwards
// every catchable signal it receives except SIGCHLD and SIGURG to the
// child's process group, reaps every orphan that reaches it (as PID 1, or as
// a child subreaper when not PID 1), and returns the exit status to use: the
// child's exit code, or 128+signal if it was killed. When the child exits,
// Run sends SIGTERM to whatever is left in the child's process group, then
// (after StopGrace) SIGKILL, reaps them, and returns. A child that cannot be
// started returns 127 (ENOENT) or 126 (EACCES and the rest) with a message
// on stderr, like a shell; no command at all returns 2.
//
// stderr receives tend's own messages only; the child writes to fd 2.
func Run(argv []string, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "tend init: no command given (usage: tend init -- CMD ARGS…)")
		return ExitUsage
	}
	r := reaper.New()
	if err := r.Start(true); err != nil {
		// Only matters outside a PID namespace: orphans then go to the
		// real init instead of us. The command still runs.
		fmt.Fprintf(stderr, "tend init: warning: %v\n", err)
		_ = r.Start(false)
	}
	defer r.Stop()

	// Subscribe before the fork: a SIGTERM that arrives while the child
	// starts must be forwarded to it, not kill tend (or, as PID 1, vanish).
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, forwarded()...)
	defer signal.Stop(sigs)

	exited := make(chan reaper.Status, 1)
	pid, fg, err := start(r, argv, func(s reaper.Status) { exited <- s })
	// From here on tend must not stop for touching the terminal (see the
	// package doc). Ignoring only after the fork matters: an ignored
	// disposition survives exec, and the child must get the defaults.
	signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTIN, syscall.SIGTTOU)
	if fg {
		defer reclaimForeground()
	}
	if err != nil {
		fmt.Fprintf(stderr, "tend init: %v\n", err)
		return startFailure(err)
	}

	for {
		select {
		case sig := <-sigs:
			forward(r, pid, sig.(syscall.Signal), stderr)
		case st := <-exited:
			stopGroup(pid, StopGrace)
			r.Drain() // collect what the last kills left behind before stopping the reaper
			return exitStatus(st.Wait)
		}
	}
}

// forwarded lists the signals Run catches and passes on (see the package doc
// for what is left out and why).
func forwarded() []os.Signal {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG,
			syscall.SIGPROF, syscall.SIGTTIN, syscall.SIGTTOU, 32, 33, 34:
			continue
		}
		sigs = append(sigs, s)
	}
	return sigs
}

// forward passes sig to the child's group (its pid if the group is not
// there). The reaper refuses once the child is reaped, so a recycled pid
// never gets it; a signal racing the child's exit is simply dropped.
func forward(r *reaper.Reaper, pid int, sig syscall.Signal, stderr io.Writer) {
	err := r.Signal(pid, sig, true)
	if err != nil && !errors.Is(err, reaper.ErrGone) && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(stderr, "tend init: forwarding %v: %v\n", sig, err)
	}
}

// exitStatus is the status a shell would report for the child.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// stopGroup ends what is left of the exited child's process group: SIGTERM
// (with SIGCONT so a stopped member can act on it), then SIGKILL after
// grace, then at most grace more for the last ones to be reaped.
//
// The leader has been reaped already, so pgid is held only by the members
// still alive: once the group is empty the number is free and could name a
// new group. Each step therefore stops as soon as the group is found empty;
// a stranger would need a full wrap of the pid space within one poll.
func stopGroup(pgid int, grace time.Duration) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // ESRCH: nothing left, the usual case
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	if waitGroupGone(pgid, grace) {
		return
	}
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return
	}
	// A member whose parent lives outside the group stays a zombie (still
	// in the group) until that parent reaps it: give up after grace.
	waitGroupGone(pgid, grace)
}

// waitGroupGone reports whether the group pgid emptied within d. Its
// members' zombies count until reaped, which the reaper does for every one
// reparented to us.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(pollGroup)
	defer tick.Stop()
	for {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return true
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return false
		}
	}
}
