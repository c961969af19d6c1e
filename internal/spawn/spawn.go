// Package spawn turns a program Spec into a running process group: argv (no
// shell unless the Spec asks for one), environment, working directory, its
// own process group, and stdout/stderr captured to the instance's rotated log
// file. The fork happens inside the reaper's registry lock (reaper.Spawn), so
// the exit can only ever reach the run's owner. Nothing here waits for a
// child: the reaper delivers every exit. A run of a program with `watchdog`
// starts through an exec shim (shim.go) that gives it WATCHDOG_PID, its own
// pid, as systemd does.
package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
)

// baseEnv is tend's own environment, read once: every instance's env shares
// its strings instead of holding a copy.
var baseEnv = sync.OnceValue(os.Environ)

const notifyVar = "NOTIFY_SOCKET"

// Env is the environment of an instance's runs: tend's own, the Spec's env
// on top, the TEND_* variables that tell a run who it is,
// NOTIFY_SOCKET=notifySocket, and with the Spec's watchdog set,
// WATCHDOG_USEC (the watchdog in µs, as systemd gives it; Start adds
// WATCHDOG_PID, the run's own pid, through the exec shim). The
// NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID of tend's own (systemd's,
// when tend is a notify service) never reach a run: without the
// instance's own the run gets the Spec's, or none. A variable of tend's
// that nothing overrides keeps its place and shares its string; an override
// takes the place of the variable it replaces, and new ones follow in name
// order.
func Env(s *program.Spec, k int, notifySocket string) []string {
	over := make(map[string]string, len(s.Env)+8)
	for key, val := range AccountEnv(s.User) { // the program's own env may still override these
		over[key] = val
	}
	for key, val := range s.Env {
		over[key] = val
	}
	if _, set := s.Env["TERM"]; s.Tty && !set {
		over["TERM"] = ttyTerm
	}
	over["TEND_ID"] = program.InstanceID(s.Name, k)
	over["TEND_PROGRAM"] = s.Name
	over["TEND_INSTANCE"] = strconv.Itoa(k)
	if notifySocket != "" {
		over[notifyVar] = notifySocket
	}
	if s.Watchdog > 0 {
		if _, ok := s.Env[watchdogUSecVar]; !ok {
			over[watchdogUSecVar] = strconv.FormatInt(max(s.Watchdog.Microseconds(), 1), 10)
		}
	}

	base := baseEnv()
	out := make([]string, 0, len(base)+len(over))
	seen := make(map[string]bool, len(over))
	for _, kv := range base {
		key, _, _ := strings.Cut(kv, "=")
		val, ok := over[key]
		switch {
		case !ok && (key == notifyVar || key == watchdogUSecVar || key == watchdogPIDVar): // tend's own supervisor's, not the run's
		case !ok:
			out = append(out, kv)
		case !seen[key]: // the first of duplicates takes the override
			seen[key] = true
			out = append(out, key+"="+val)
		}
	}
	var added []string
	for key := range over {
		if !seen[key] {
			added = append(added, key)
		}
	}
	slices.Sort(added)
	for _, key := range added {
		out = append(out, key+"="+over[key])
	}
	return out
}

// Request is one run to start.
type Request struct {
	Spec  *program.Spec
	Env   []string // from Env, plus per-run additions
	Out   *Output
	Owner reaper.Owner // gets the run's exit from the reaper
	// Cgroup, when set, is the directory of the cgroup the run is placed
	// in at fork (clone3 CLONE_INTO_CGROUP), so that no process of it ever
	// runs outside. The caller keeps it until Start (or Wait) returns, and
	// closes it.
	Cgroup *os.File
	// TTY, when set, is the slave of the run's pseudo-terminal
	// (terminal.Open): the run's stdin, stdout and stderr, and the
	// controlling terminal of its new session. Out is then not read (the
	// terminal keeper reads the terminal into the log, package keeper).
	// The caller keeps it
	// until Start (or Wait) returns, and closes it.
	TTY *os.File
	// Protocol: the run's stdin and stdout are the daemon's, for the
	// protocol client (docs/protocol.md); Pending.Protocol hands them over.
	Protocol bool
}

var (
	devNullOnce sync.Once
	devNull     *os.File // shared stdin of every run
	devNullErr  error
)

// nullFile is /dev/null, opened once for every run's stdin.
func nullFile() (*os.File, error) {
	devNullOnce.Do(func() { devNull, devNullErr = os.Open(os.DevNull) })
	return devNull, devNullErr
}

// Start launches one run and returns its pid. An error means nothing runs
// (missing binary, permission, bad cwd): the caller treats it as a spawn
// failure. The child leads its own session and process group, so a stop
// reaches every process it started that did not leave the group. Callers
// bound how many Starts run at once (see supervisor's start slots).
func Start(r *reaper.Reaper, req Request) (int, error) {
	p, err := Begin(r, req)
	if err != nil {
		return 0, err
	}
	return p.Wait()
}

// Pending is a run whose fork is under way (Begin). Wait must be called,
// once.
type Pending struct {
	r     *reaper.Reaper
	l     *launch
	out   *Output
	pipes *runPipes // nil with a terminal
	path  string
	cwd   string
}

// Begin is Start up to the fork, which it hands to the forker thread
// without waiting for it: what the caller does before Wait (publish what
// came before the run) happens while the thread forks. An error means
// nothing was forked.
func Begin(r *reaper.Reaper, req Request) (*Pending, error) {
	null, err := nullFile()
	if err != nil {
		return nil, err
	}
	argv := req.Spec.Argv()
	path, err := lookPath(argv[0], req.Spec.Cwd, req.Env)
	if err != nil {
		return nil, err
	}
	cred, err := Credential(req.Spec.User, req.Spec.Group)
	if err != nil {
		return nil, err
	}
	files, pipes, err := runFiles(req, null, cred)
	if err != nil {
		return nil, err
	}
	attr := &syscall.ProcAttr{
		Dir:   req.Spec.Cwd,
		Env:   req.Env,
		Files: files,
		// Its own session (and so its own process group, pgid == pid):
		// stop signals reach the whole group, the process tree can be found
		// by session, and no terminal signal of tend's reaches it. With a
		// terminal, that is its controlling terminal (its stdin, fd 0).
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: req.TTY != nil, Credential: cred},
	}
	if req.Cgroup != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, int(req.Cgroup.Fd())
	}
	l := newLaunch(path, argv, attr, req.Spec.Watchdog > 0, req.Owner)
	if err := l.begin(r); err != nil {
		if pipes != nil {
			_ = req.Out.watchRun(pipes) // the streams of a run that never started end at once
		}
		return nil, fmt.Errorf("exec %s: %w", path, err)
	}
	return &Pending{r: r, l: l, out: req.Out, pipes: pipes, path: path, cwd: req.Spec.Cwd}, nil
}

// Wait returns the pid of the run Begin handed over, once it runs (its
// exec, or the shim's exec of the program, has succeeded), or why it
// does not.
func (p *Pending) Wait() (int, error) {
	pid, err := p.l.end()
	if err == nil {
		err = p.l.wait(p.r, pid)
	}
	if p.pipes != nil {
		if werr := watchRun(p.out, p.pipes); werr != nil && err == nil {
			// Its output would never be read: the run must not go on.
			// Its exit is the launch's, not the owner's (a spawn failure).
			p.l.failed.Store(true)
			_ = p.r.Signal(pid, syscall.SIGKILL, true)
			return 0, werr
		}
	}
	if err != nil {
		if p.cwd != "" {
			if _, serr := os.Stat(p.cwd); serr != nil {
				return 0, fmt.Errorf("cwd %s: %w", p.cwd, serr)
			}
		}
		return 0, fmt.Errorf("exec %s: %w", p.path, err)
	}
	return pid, nil
}

// Protocol hands over the daemon's ends of a protocol run's stdin (to
// write) and stdout (to read), once Wait has returned a pid; nil without
// Request.Protocol. The caller owns them.
func (p *Pending) Protocol() (stdin, stdout *os.File) {
	if p.pipes == nil {
		return nil, nil
	}
	in, out := p.pipes.protoIn, p.pipes.protoOut
	p.pipes.protoIn, p.pipes.protoOut = nil, nil
	return in, out
}

// watchRun is Output.watchRun; tests make it fail.
var watchRun = (*Output).watchRun

// ttyTerm is a run's TERM in a terminal of tend's, unless its env sets one:
// what tend's screen understands, as tmux's own terminals are screen-256color.
const ttyTerm = "xterm-256color"

// runFiles returns a run's stdin, stdout and stderr: /dev/null and the
// capture's pipes, or the terminal's slave three times (given to the run's
// user, as login does, so that it can open its terminal by name). pipes
// are for the caller to hand to Output.watchRun once the child has its
// copies; nil with a terminal.
func runFiles(req Request, null *os.File, cred *syscall.Credential) (files []uintptr, pipes *runPipes, err error) {
	if req.TTY != nil {
		fd := req.TTY.Fd()
		if cred != nil && int(cred.Uid) != os.Geteuid() {
			if err := unix.Fchown(int(fd), int(cred.Uid), -1); err != nil {
				return nil, nil, fmt.Errorf("giving the terminal to uid %d: %w", cred.Uid, err)
			}
		}
		return []uintptr{fd, fd, fd}, nil, nil
	}
	pipes, err = req.Out.openRun(req.Protocol)
	if err != nil {
		return nil, nil, err
	}
	in := null.Fd()
	if pipes.stdin != nil {
		in = pipes.stdin.Fd()
	}
	return []uintptr{in, pipes.stdout.Fd(), pipes.stderr.Fd()}, pipes, nil
}

// lookPath resolves argv[0] like a shell would, with the run's own PATH; a
// name with a slash is taken relative to the run's cwd.
func lookPath(name, cwd string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) && cwd != "" {
			return filepath.Join(cwd, name), nil
		}
		return name, nil
	}
	pathEnv := os.Getenv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	denied := "" // a match that is not executable: EACCES, as a shell says, if nothing better turns up
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		st, err := os.Stat(p)
		switch {
		case err != nil || st.IsDir():
		case st.Mode()&0o111 != 0:
			return p, nil
		case denied == "":
			denied = p
		}
	}
	if denied != "" {
		return "", fmt.Errorf("exec %s: %w", denied, syscall.EACCES)
	}
	return "", fmt.Errorf("exec %s: %w", name, exec.ErrNotFound)
}

// Errno names the errno behind a spawn error ("ENOENT"), or "" if none.
func Errno(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		if name := errnoNames[e]; name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(e))
	}
	if errors.Is(err, exec.ErrNotFound) {
		return "ENOENT"
	}
	return ""
}

var errnoNames = map[syscall.Errno]string{
	syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES", syscall.EPERM: "EPERM",
	syscall.ENOEXEC: "ENOEXEC", syscall.ENOTDIR: "ENOTDIR", syscall.E2BIG: "E2BIG",
	syscall.ENOMEM: "ENOMEM", syscall.EAGAIN: "EAGAIN", syscall.EMFILE: "EMFILE",
	syscall.ETXTBSY: "ETXTBSY", syscall.ELOOP: "ELOOP", syscall.EISDIR: "EISDIR",
}
