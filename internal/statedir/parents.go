package statedir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks is how many symlinks a walk follows before it gives up, as the
// kernel's path lookup does (ELOOP).
const maxLinks = 40

// checkParents refuses the state directory abs (absolute and clean; what
// names it in messages) when
// another user could rename or replace it: when a directory a name is
// looked up in on the way to it belongs to a user other than root and
// tend's effective uid, or is writable by group or others without the
// sticky bit, or when a symlink followed on the way belongs to another
// user. That user could move the state directory aside and put one of
// their own in its place, a keeper socket in it, between two lookups of
// the path (docs/trust.md#state-directory). sshd's StrictModes refuses a
// home directory on the same grounds; /tmp (sticky) stays fine as long as
// what tend made in it is tend's.
//
// The walk resolves the path as the kernel does, one name at a time,
// following symlinks, so every directory the path passes through is
// checked, those a symlink leads to included. It stops at the first name
// missing: tend makes the rest itself. The state directory itself (the
// last name) is not resolved: Open checks it.
func checkParents(what, abs string) error {
	euid := uint32(os.Geteuid())
	todo := split(abs)
	dir, links := "/", 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			dir = filepath.Dir(dir) // dir is resolved, its parent checked on the way down
			continue
		}
		if err := checkParent(what, dir, abs, euid); err != nil {
			return err
		}
		if len(todo) == 0 {
			return nil
		}
		next := filepath.Join(dir, name)
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err == unix.ENOENT {
			return nil // the rest is tend's to make, in dir, which is safe
		} else if err != nil {
			return fmt.Errorf("%s: %s: %w", what, next, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			dir = next
			continue
		}
		if links++; links > maxLinks {
			return fmt.Errorf("%s: %s: %w", what, abs, unix.ELOOP)
		}
		if st.Uid != 0 && st.Uid != euid {
			return fmt.Errorf("%w: %s, a symlink on the way to %s %s, belongs to uid %d, who could point it elsewhere; use a path only root and tend's user can change",
				ErrUnsafe, next, what, abs, st.Uid)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if filepath.IsAbs(target) {
			dir = "/"
		}
		todo = append(split(target), todo...)
	}
	return nil
}

// checkParent refuses dir, a directory a name on the way to abs is looked
// up in, if another user could change that name.
func checkParent(what, dir, abs string, euid uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%s: %s: %w", what, dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: %s is not a directory", what, dir)
	}
	if st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%w: %s, a parent of %s %s, belongs to uid %d, who could replace what is in it; use a directory whose parents only root and tend's user can change",
			ErrUnsafe, dir, what, abs, st.Uid)
	}
	if mode := st.Mode & 0o7777; mode&0o022 != 0 && mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%w: %s, a parent of %s %s, is writable by group or others without the sticky bit (mode %04o), so they could replace what is in it; use a directory whose parents only root and tend's user can change",
			ErrUnsafe, dir, what, abs, mode)
	}
	return nil
}

// split is the names of path, without empty ones and ".".
func split(path string) []string {
	var out []string
	for _, name := range strings.Split(path, "/") {
		if name != "" && name != "." {
			out = append(out, name)
		}
	}
	return out
}
