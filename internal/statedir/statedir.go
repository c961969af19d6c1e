// Package statedir opens tend's state directory and the files in it without
// ever following a symlink (docs/trust.md#state-directory). tend often runs as root, and a state
// directory may sit in a folder others can write (a shared project, a
// scratch area): whoever can plant "tend.lock -> /etc/shadow" there must not
// make tend truncate the target, nor a log symlinked to a dotfile collect a
// child's output.
//
// So the directory itself is refused when it is a symlink, belongs to
// another user or is writable by group or others, and so is one another
// user could replace through a parent (parents.go); it is then held open, and
// every file in it is opened relative to that descriptor with O_NOFOLLOW
// (openat, mkdirat, renameat, unlinkat, mknodat), by a single path component.
// A path that is not a regular file where one is expected (a FIFO planted
// where a log goes, say) is refused too, without blocking on it.
//
// It also holds, once, the rules of the files tend keeps there for the
// next daemon (runs.json, programs.json, ...): their form, one record a
// line, a damaged one set aside and never written over (lines.go), and
// the journaled Table for records that change many times a second
// (table.go).
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// Dir is an open directory of tend's, trusted once checked. Its methods are
// safe for concurrent use (they are single system calls on an fd that stays
// open until Close).
type Dir struct {
	path   string
	fd     int
	health *Health // shared by the directory and its subdirectories
	prefix string  // the directory's path under the state directory, "" or "audit/", for Health's file names
}

// ErrUnsafe is wrapped by the refusal of a directory tend must not trust.
// It also matches program.ErrBadConfig: tend up exits 2 on it.
var ErrUnsafe = fmt.Errorf("%w: unsafe state directory", program.ErrBadConfig)

// Open makes path (and its missing parents) and opens it as a state
// directory: created mode 0700; refused if it is a symlink, not owned by
// the effective uid, or writable by group or others, or if another user
// could replace it through one of its parents (checkParents). An existing
// directory of ours that others may read or enter is narrowed to 0700.
func Open(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := checkParents("state_dir", abs); err != nil {
		return nil, err // before making anything in a directory another user controls
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	if err := unix.Mkdir(abs, 0o700); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("state_dir: mkdir %s: %w", abs, err)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuseOpen(abs, err)
	}
	d := &Dir{path: abs, fd: fd, health: newHealth()}
	if err := d.check(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return d, nil
}

// refuseOpen words the failure to open a directory with O_NOFOLLOW.
func refuseOpen(path string, err error) error {
	if err == unix.ELOOP || err == unix.ENOTDIR {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symlink; point state_dir at the real directory", ErrUnsafe, path)
		}
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafe, path)
	}
	return fmt.Errorf("state_dir: open %s: %w", path, err)
}

// check refuses a directory that is not the effective user's own or that
// others may write, and narrows one others may read or enter to 0700.
func (d *Dir) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%w: %s belongs to uid %d, not to tend's uid %d; use a directory of tend's own user", ErrUnsafe, d.path, st.Uid, uid)
	}
	mode := st.Mode & 0o7777
	if mode&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by group or others (mode %04o); run chmod 700 %s", ErrUnsafe, d.path, mode, d.path)
	}
	if mode&0o077 != 0 {
		if err := unix.Fchmod(d.fd, 0o700); err != nil {
			return fmt.Errorf("state_dir: chmod 700 %s: %w", d.path, err)
		}
	}
	return nil
}

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// Join is the path of name in the directory, for messages and for what
// must be named by path (a socket clients connect to).
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// FD is the directory's descriptor, for *at system calls of other packages.
func (d *Dir) FD() int { return d.fd }

// Health is what the writers of the state directory report (shared by
// its subdirectories).
func (d *Dir) Health() *Health { return d.health }

// Rel is name as Health names it: its path under the state directory.
func (d *Dir) Rel(name string) string { return d.prefix + name }

// Close closes the directory's descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Sub makes (mode 0700) and opens the subdirectory name, checked as Open
// checks the state directory itself.
func (d *Dir) Sub(name string) (*Dir, error) {
	if err := component(name); err != nil {
		return nil, err
	}
	if err := unix.Mkdirat(d.fd, name, 0o700); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("state_dir: mkdir %s: %w", d.Join(name), err)
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuseOpen(d.Join(name), err)
	}
	s := &Dir{path: d.Join(name), fd: fd, health: d.health, prefix: d.prefix + name + "/"}
	if err := s.check(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// ErrNotRegular is wrapped by OpenFile's refusal of a path that exists and
// is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// OpenFile opens the regular file name (one path component) with flag
// (os.O_* flags) and, when it creates it, perm. It never follows a
// symlink (ELOOP), never blocks opening a FIFO, and refuses anything but a
// regular file.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := component(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: d.Join(name), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: d.Join(name), Err: ErrNotRegular}
	}
	// O_NONBLOCK only guarded the open; a regular file ignores it, but the
	// flag would show through to whoever inherits the descriptor.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: d.Join(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.Join(name)), nil
}

// ReadFile reads the regular file name whole.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	f, err := d.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFileAtomic replaces name with data, mode perm, so that a reader sees
// the old file or the new one, never a torn one: a fresh temporary file,
// written, (with sync) flushed to disk, then renamed over name, and (with
// sync) the directory flushed too, so that the new file is there after a
// power cut as well.
func (d *Dir) WriteFileAtomic(name string, data []byte, perm os.FileMode, sync bool) (err error) {
	if err := component(name); err != nil {
		return err
	}
	defer func() { d.health.Report(d.Rel(name), err) }()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	var n int
	n, err = f.Write(data)
	if err == nil && n < len(data) {
		err = &fs.PathError{Op: "write", Path: d.Join(tmp), Err: io.ErrShortWrite}
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, name)
	}
	if err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return err
	}
	if sync {
		if err := unix.Fsync(d.fd); err != nil {
			return &fs.PathError{Op: "fsync", Path: d.path, Err: err}
		}
	}
	return nil
}

// Rename renames oldName to newName, both in the directory; a symlink at
// newName is replaced, never followed.
func (d *Dir) Rename(oldName, newName string) error {
	if err := component(oldName); err != nil {
		return err
	}
	if err := component(newName); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, oldName, d.fd, newName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(oldName), New: d.Join(newName), Err: err}
	}
	return nil
}

// Remove removes the file (not a directory) name; a symlink is removed
// itself. A missing file is not an error.
func (d *Dir) Remove(name string) error {
	if err := component(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// Mkfifo makes the named pipe name with perm, unless one is there already;
// anything else at name (a symlink, a file) is removed first.
func (d *Dir) Mkfifo(name string, perm os.FileMode) error {
	if err := component(name); err != nil {
		return err
	}
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO && st.Uid == uint32(os.Geteuid()) {
		return nil
	}
	if err == nil {
		if err := d.Remove(name); err != nil {
			return err
		}
	}
	if err := unix.Mknodat(d.fd, name, unix.S_IFIFO|uint32(perm.Perm()), 0); err != nil && err != unix.EEXIST {
		return &fs.PathError{Op: "mkfifo", Path: d.Join(name), Err: err}
	}
	return nil
}

// Lstat describes name without following a symlink.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := component(name); err != nil {
		return st, err
	}
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &fs.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return st, nil
}

// Names lists the names in the directory, in no particular order.
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// component refuses a name that is not one plain path component.
func component(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("statedir: %q is not a file name", name)
	}
	return nil
}
