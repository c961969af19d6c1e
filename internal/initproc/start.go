package initproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
)

// defaultPath is searched when PATH is unset, as shells do; minimal
// container images often run without one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// errNotFound is a command name that is on no PATH directory.
var errNotFound = errors.New("command not found")

// start forks and execs argv under the reaper's lock, registered to owner.
// fg reports that the child's group was given the terminal's foreground
// (even if the exec then failed), which the caller must take back.
func start(r *reaper.Reaper, argv []string, owner reaper.Owner) (pid int, fg bool, err error) {
	path, err := lookPath(argv[0])
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", argv[0], err)
	}
	fg = inForeground()
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: inheritedFiles(),
		Sys: &syscall.SysProcAttr{
			// Its own group (pgid == pid), so forwarded signals and the
			// final stop reach everything it starts that stays in it.
			Setpgid: true,
			// Foreground implies Setpgid; the kernel would otherwise stop a
			// background child that reads the terminal (SIGTTIN). Go does the
			// TIOCSPGRP with signals blocked, so no SIGTTOU stops the child.
			Foreground: fg,
			Ctty:       0, // tend's stdin (a parent fd for Foreground)
		},
	}
	// killGroup false: the reaper's straggler kill is an immediate SIGKILL,
	// and Run owes the group a SIGTERM and a grace first (stopGroup).
	pid, err = r.Spawn(func() (int, error) { return syscall.ForkExec(path, argv, attr) }, owner, false)
	if err != nil {
		return 0, fg, fmt.Errorf("exec %s: %w", path, err)
	}
	return pid, fg, nil
}

// startFailure is the exit status for an error from start, as a shell's.
func startFailure(err error) int {
	if errors.Is(err, errNotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return ExitNotFound
	}
	return ExitCannotExec
}

// lookPath resolves a command name like a shell: a name with a slash is used
// as is; otherwise the first executable file on PATH wins, and a file that is
// there but not executable is returned so that exec reports EACCES (126)
// rather than "not found" (127).
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathEnv, ok := os.LookupEnv("PATH")
	if !ok {
		pathEnv = defaultPath
	}
	denied := ""
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "." // an empty PATH element is the working directory
		}
		p := filepath.Join(dir, name)
		if !strings.Contains(p, "/") {
			p = "./" + p
		}
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			continue
		}
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
		if denied == "" {
			denied = p
		}
	}
	if denied != "" {
		return denied, nil
	}
	return "", errNotFound
}

// inheritedFiles is tend's fds 0, 1 and 2 for the child; one that tend does
// not have open is passed as closed (-1) rather than failing the start.
func inheritedFiles() []uintptr {
	fds := make([]uintptr, 3)
	for i := range fds {
		fds[i] = uintptr(i)
		if _, err := unix.FcntlInt(uintptr(i), unix.F_GETFD, 0); err != nil {
			fds[i] = ^uintptr(0)
		}
	}
	return fds
}

// inForeground reports whether stdin is tend's controlling terminal with
// tend's group in its foreground: only then may the child take it over.
//
// A group that lives outside our PID namespace reads as 0 (tend run as PID 1
// by `unshare --pid --fork` from a shell). Then both numbers are 0 whichever
// group holds the terminal, so tend cannot tell it holds it, and could not
// name its group to take it back: it leaves the terminal alone.
func inForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp != 0 && pgrp == syscall.Getpgrp()
}

// reclaimForeground gives the terminal back to tend's group, so whatever
// runs after tend (a shell without job control) is not left in the
// background of a dead group. It needs SIGTTOU ignored, which Run does.
func reclaimForeground() {
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
}
