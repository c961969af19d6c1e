package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/handover"
	"github.com/tend-sh/tend/internal/limits"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/supervisor"
)

// Upgrade in place (tend upgrade, POST /v1/upgrade, SIGUSR2): the daemon
// re-executes the binary now at its path in the same process. Same pid
// (systemd's MAINPID does not change), every run stays its child (exact
// exit statuses), and the listeners, the lock, each run's notify socket
// and output pipes, and the upgrade request's own connection are handed
// over by name (package handover); the intent record and runs.json say
// the rest. Steps, each undone in reverse if a later one fails (the old
// daemon then serves on as before and answers with the reason):
//
//  1. the new binary must run: `<exe> version`, through the reaper like a
//     probe (never exec.Cmd.Wait: the reaper is the one waiter);
//  2. the upgrade request's connection is taken out of the HTTP server;
//  3. the API stops taking requests and waits for those under way: an
//     upgrade waits for a reload, add, rm, scale or operator action in
//     flight (one request at a time of a rolling restart), and those
//     that come meanwhile wait in the kernel's accept queue for the new
//     daemon; the reload lock is taken (a SIGHUP reload in flight);
//  4. the reaper stops collecting exits: one that happens from here on
//     stays a zombie for the new daemon, which registers every run
//     handed over before its first drain;
//  5. every instance is frozen (supervisor.Manager.Freeze): between two
//     steps, its inbox's mail handled, its notify socket and output no
//     longer read, its output written to disk;
//  6. the intent record and runs.json are written;
//  7. the descriptors are gathered in the process's table (those the
//     epoll loops hold are in tables of their own: see epoll.Watch.Dup),
//     made inheritable, and the binary exec'd.
//
// What the exec does not keep, the new daemon sets again: the signal
// handlers (execve resets them; SIGUSR2 and SIGHUP are blocked across
// the exec so that one arriving before the new runtime handles them is
// not fatal), the subreaper flag (reaper.Start) and the cgroup leaf it
// is already in (cgroup.Setup finds it).

// upgradeState is what the daemon hands the binary it becomes, beside the
// descriptors.
type upgradeState struct {
	From       string                     `json:"from"`        // the version that ran
	ConfigFile string                     `json:"config_file"` // the config file's path
	Config     []byte                     `json:"config"`      // its text as last loaded: the new daemon runs the same fleet
	Lives      map[string]supervisor.Live `json:"lives"`       // each instance's part, by id
	Limit      unix.Rlimit                `json:"limit"`       // the descriptor limit runs get (limits.Original)
	Printed    uint64                     `json:"printed"`     // the seq of the last event printed on stderr
	Signals    []int                      `json:"signals"`     // SIGTERM, SIGINT, SIGHUP that came meanwhile, for the new daemon
	ExecAt     time.Time                  `json:"exec_at"`
}

// Names of the daemon's own descriptors in the handover.
const (
	lockFD   = "lock"
	answerFD = "api.answer" // the upgrade request's connection
	unixFD   = "api.unix"
	tcpFD    = "api.tcp"
)

// errUpgrading refuses a second upgrade while one is under way.
var errUpgrading = &api.StatusError{Code: http.StatusConflict, Err: errors.New("an upgrade is already under way")}

// upgrade re-executes the daemon; see the top of this file. handoff is the
// API request's (nil for SIGUSR2). It returns only when the upgrade did
// not happen.
func (d *daemon) upgrade(ctx context.Context, handoff api.Handoff) error {
	if !d.upgrading.CompareAndSwap(false, true) {
		return errUpgrading
	}
	defer d.upgrading.Store(false)
	// A stop waits for an upgrade to exec or be undone; the stop that
	// began first refuses the upgrade (stopping checks again once the API
	// is paused: a tend down answered just before).
	d.upgradeMu.Lock()
	defer d.upgradeMu.Unlock()
	if err := d.stopping(); err != nil {
		return err
	}
	exe, err := startedAs()
	if err != nil {
		return fmt.Errorf("upgrade: cannot find the daemon's binary: %w", err)
	}
	to, err := d.checkBinary(exe)
	if err != nil {
		return &api.StatusError{Code: http.StatusUnprocessableEntity, Err: err}
	}
	d.note("upgrading from %s to %s (%s)", d.opts.Version, to, exe)
	out := handover.NewOut()
	defer out.Close() // reached only when the exec did not happen
	if handoff != nil {
		fd, err := handoff(d.opts.Version, to)
		if err != nil {
			return fmt.Errorf("upgrade: taking the request's connection: %w", err)
		}
		if fd >= 0 {
			out.Add(answerFD, fd)
		}
	}
	st, undo, err := d.quiesce(ctx, out)
	if err != nil {
		return err
	}
	defer undo()
	st.From, st.ConfigFile, st.Config = d.opts.Version, d.cfg.File, d.cfgText // reloadMu is held (quiesce)
	env, err := out.Prepare(st)
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	err = execSelf(exe, append(os.Environ(), env))
	out.Undo()
	d.note("upgrade: exec %s failed: %v; going on as %s", exe, err, d.opts.Version)
	return fmt.Errorf("upgrade: exec %s: %w", exe, err)
}

// stopping refuses an upgrade once the daemon has begun to stop.
func (d *daemon) stopping() error {
	select {
	case <-d.shutdown:
		return &api.StatusError{Code: http.StatusServiceUnavailable, Err: fmt.Errorf("%w: the daemon is stopping", program.ErrStopping)}
	default:
		return nil
	}
}

// checkBinary runs `<exe> version` and returns the version it printed.
func (d *daemon) checkBinary(exe string) (string, error) {
	argv0 := exe
	if len(os.Args) > 0 {
		argv0 = os.Args[0] // what the binary answers to (a multi-call binary reads it)
	}
	out, err := spawn.Command(d.reaper, exe, []string{argv0, "version"}, 30*time.Second)
	if err != nil {
		return "", fmt.Errorf("the new binary %s does not run (%s version: %v); nothing was changed", exe, exe, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "tend" {
		return "", fmt.Errorf("the new binary %s is not tend (%s version printed %q); nothing was changed", exe, exe, strings.TrimSpace(string(out)))
	}
	return f[1], nil
}

// quiesce does steps 3 to 7 (see the top of this file): it returns the
// state to hand over, with every descriptor in out, and undo, which lets
// everything go on.
func (d *daemon) quiesce(ctx context.Context, out *handover.Out) (st upgradeState, undo func(), err error) {
	var undos []func()
	undo = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, d.stopBudget())
	defer cancel()
	undos = append(undos, d.api.Resume)
	if err := d.api.Pause(pctx); err != nil {
		return st, undo, fmt.Errorf("upgrade: %w", err)
	}
	if err := d.stopping(); err != nil {
		return st, undo, err
	}
	d.applyMu.Lock()
	d.reloadMu.Lock()
	undos = append(undos, func() { d.reloadMu.Unlock(); d.applyMu.Unlock() })
	st.Limit = limits.Original(d.reaper) // may ask a child: before the reaper pauses
	d.reaper.Pause()
	undos = append(undos, d.reaper.Resume)
	lives, fds, thaw, err := d.mgr.Freeze(pctx)
	undos = append(undos, thaw)
	for name, fd := range fds {
		out.Add(name, fd)
	}
	if err != nil {
		return st, undo, fmt.Errorf("upgrade: %w", err)
	}
	st.Lives = lives
	d.intents.Freeze()
	undos = append(undos, d.intents.Thaw)
	own, err := d.ownFDs()
	for name, fd := range own {
		out.Add(name, fd)
	}
	if err != nil {
		return st, undo, fmt.Errorf("upgrade: %w", err)
	}
	st.Printed = d.printed.Load()
	st.Signals = d.takeDeferred()
	undos = append(undos, func() { d.redeliver(st.Signals) })
	st.ExecAt = time.Now()
	return st, undo, nil
}

// ownFDs duplicates the daemon's own descriptors to hand over: the lock
// (a flock belongs to the open file, which the new daemon keeps holding)
// and the API's listeners.
func (d *daemon) ownFDs() (map[string]int, error) {
	fds, err := d.api.ListenerFDs()
	if err != nil {
		return nil, err
	}
	lock, err := unix.FcntlInt(d.state.lock.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("the lock: %w", err)
	}
	fds[lockFD] = lock
	return fds, nil
}

// execSelf execs exe in this process with this process's argv. SIGUSR2 and
// SIGHUP are blocked on the thread that execs: execve resets their
// handlers to the default, which ends the process, and one that arrives
// before the new runtime has installed its own must wait (blocked
// signals stay pending across execve) rather than kill the daemon. If the
// exec fails the mask and the descriptor limit (syscall.Exec puts back
// the one Go started with) are restored.
// startedAs is the path of the daemon's binary as it was started, which an
// upgrade re-executes (the file now at its path, docs/cli.md): argv[0]
// when it is a path to this very binary, so that a symlink an installer
// points elsewhere is followed anew (tend-daemon reached through one, as
// the lean tend execs it: docs/cli.md#two-files); else the file the
// kernel ran. Run reads it first, before anything could change the
// working directory a relative argv[0] is read against.
var startedAs = sync.OnceValues(func() (string, error) { return binaryPath(os.Args[0]) })

// binaryPath is startedAs for a process started as argv0.
func binaryPath(argv0 string) (string, error) {
	if strings.Contains(argv0, "/") {
		abs, err := filepath.Abs(argv0)
		fa, aerr := os.Stat(abs)
		fe, eerr := os.Stat("/proc/self/exe")
		if err == nil && aerr == nil && eerr == nil && os.SameFile(fa, fe) {
			return abs, nil
		}
	}
	return os.Executable()
}

func execSelf(exe string, env []string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	for _, s := range []syscall.Signal{syscall.SIGUSR2, syscall.SIGHUP} {
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return fmt.Errorf("blocking signals: %w", err)
	}
	err := syscall.Exec(exe, os.Args, env)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	_ = unix.Prlimit(0, unix.RLIMIT_NOFILE, &lim, nil)
	return err
}

// Upgrade implements api.Backend.
func (b *backend) Upgrade(ctx context.Context, handoff api.Handoff) error {
	return b.d.upgrade(ctx, handoff)
}

// takeDeferred returns (and forgets) the signals that came during the
// upgrade, for the new daemon.
func (d *daemon) takeDeferred() []int {
	d.sigMu.Lock()
	defer d.sigMu.Unlock()
	out := d.deferred
	d.deferred = nil
	return out
}

// deferSignal keeps a signal that came during an upgrade; false if no
// upgrade is under way (the caller acts on it). A SIGUSR2 is not kept:
// two in a row run one upgrade.
func (d *daemon) deferSignal(s os.Signal) bool {
	if !d.upgrading.Load() || s == syscall.SIGUSR2 {
		return false
	}
	d.sigMu.Lock()
	defer d.sigMu.Unlock()
	if sig, ok := s.(syscall.Signal); ok {
		d.deferred = append(d.deferred, int(sig))
	}
	return true
}

// redeliver hands signals back to the serve loop: the upgrade did not
// happen, or this is the new daemon acting on those the old one kept.
func (d *daemon) redeliver(sigs []int) {
	for _, s := range sigs {
		select {
		case d.sigs <- syscall.Signal(s):
		default:
		}
	}
}

// upgradeIn is what the program this process was handed over, for start.
type upgradeIn struct {
	in *handover.In
	st upgradeState
}

// takeHandover reads the handover of the program this process was, if it
// re-executed itself (nil otherwise).
func takeHandover() (*upgradeIn, error) {
	in, err := handover.Take()
	if in == nil || err != nil {
		return nil, err
	}
	u := &upgradeIn{in: in}
	if err := in.State(&u.st); err != nil {
		return nil, fmt.Errorf("upgrade: the handover: %w", err)
	}
	limits.Inherit(u.st.Limit)
	return u, nil
}

// expected lists the pids of the runs handed over that are this process's
// children still unreaped: the reaper must hold their exits for their
// instances (reaper.Expect) from its first drain on.
func (u *upgradeIn) expected() []int {
	var pids []int
	for _, l := range u.st.Lives {
		if r := l.Run; r != nil && !r.Adopted && r.Reaped == nil {
			pids = append(pids, r.PID)
		}
	}
	return pids
}

// carried is the handover for the manager.
func (u *upgradeIn) carried() supervisor.Carried {
	return supervisor.Carried{Lives: u.st.Lives, Take: u.in.FD}
}

// upgraded publishes the upgraded event and answers the upgrade request,
// once this daemon serves and has taken its fleet up.
func (d *daemon) upgraded(u *upgradeIn) {
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{
		Phase: program.PhaseUpgraded, PID: os.Getpid(), From: u.st.From, To: d.opts.Version,
		Tracking: d.tracking, TrackingWhy: d.trackingWhy,
	}})
	if fd, ok := u.in.FD(answerFD); ok {
		res := api.Upgraded{From: u.st.From, To: d.opts.Version, PID: os.Getpid(), ServingAfterMS: time.Since(u.st.ExecAt).Milliseconds()}
		if err := api.AnswerHandedOver(fd, http.StatusOK, res); err != nil {
			d.note("upgrade: answering the request: %v", err)
		}
	}
	if left := u.in.CloseRest(); len(left) > 0 {
		d.note("upgrade: %d descriptors handed over were not taken up (%s)", len(left), strings.Join(left, ", "))
	}
	d.redeliver(u.st.Signals)
}
