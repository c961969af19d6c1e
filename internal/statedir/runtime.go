package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ID names a state directory in places outside it (the runtime directory,
// the cgroup subtree): a short digest of its absolute path, the same for
// every daemon of that directory.
func ID(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(sum[:6])
}

// Runtime makes and opens the private directory for what must be reached
// by a short path (notify sockets, whose path is limited to 107 bytes):
// /run/tend/ID as root, else $XDG_RUNTIME_DIR/tend/ID, else
// /tmp/tend-UID/ID. Each level is checked like the state directory: not a
// symlink, tend's own, not writable by others, its parents none another
// user could replace. With traversable the last
// level is mode 0711 instead of 0700, so a run of another user can reach
// its own socket in it (the socket is that user's, mode 0600) without
// listing the others.
func Runtime(id string, traversable bool) (*Dir, error) {
	base, err := runtimeBase()
	if err != nil {
		return nil, err
	}
	if err := checkParents("runtime dir", filepath.Join(base, id)); err != nil {
		return nil, err
	}
	d, err := openChecked(base)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	mode := uint32(0o700)
	if traversable {
		mode = 0o711
	}
	if err := unix.Mkdirat(d.fd, id, mode); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("runtime dir: mkdir %s: %w", d.Join(id), err)
	}
	fd, err := unix.Openat(d.fd, id, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuseOpen(d.Join(id), err)
	}
	r := &Dir{path: d.Join(id), fd: fd}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not tend's own private directory", ErrUnsafe, r.path)
	}
	if st.Mode&0o777 != mode {
		if err := unix.Fchmod(fd, mode); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("runtime dir: %w", err)
		}
	}
	return r, nil
}

// runtimeBase is the directory that holds every state directory's runtime
// directory, made if missing.
func runtimeBase() (string, error) {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/tend", os.MkdirAll("/run/tend", 0o755)
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "tend"), os.MkdirAll(filepath.Join(x, "tend"), 0o700)
	}
	dir := filepath.Join(os.TempDir(), "tend-"+strconv.Itoa(uid))
	if err := unix.Mkdir(dir, 0o700); err != nil && err != unix.EEXIST {
		return "", fmt.Errorf("runtime dir: mkdir %s: %w", dir, err)
	}
	return dir, nil
}

// openChecked opens an existing directory that must be tend's own and
// writable only by it (its mode is left as it is).
func openChecked(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuseOpen(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not tend's own directory, or others may write it", ErrUnsafe, path)
	}
	return &Dir{path: path, fd: fd}, nil
}
