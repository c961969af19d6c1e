package cgroup

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Subgroups. tend never delegates a group to its run, so only a run as root
// can make groups below its own, and only deliberately; yet Procs must find
// the processes it moved there. Asking each group's cgroup.stat costs a
// file open per instance on every listing; the tree's own directory answers
// for all of them at once: its cgroup.stat counts every group below it
// (nr_descendants), and its link count (kernfs: 2 + subdirectories) the
// direct ones. Equal, and no instance group has a group below it.

// nestedMemo is the last answer of Nested, shared by the samples of one
// listing (they pass the same asOf).
type nestedMemo struct {
	mu     sync.Mutex // guards asOf and nested
	asOf   time.Time
	nested bool
}

// Nested reports whether some group below the tree's has a group below it
// (or that cannot be ruled out): then TopProcs is not every process of a
// run, and Procs must be asked instead. Calls with the same asOf share one
// answer: a listing asks once for its thousands of groups.
func (t *Tree) Nested(asOf time.Time) bool {
	m := &t.nested
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.asOf.IsZero() && m.asOf.Equal(asOf) {
		return m.nested
	}
	m.asOf, m.nested = asOf, nested(t.path)
	return m.nested
}

// nested is Nested's reading of dir: its link count, its cgroup.stat, its
// link count again (a group made or removed in between makes the two
// counts disagree, and the answer is the careful one).
func nested(dir string) bool {
	before, err := subdirs(dir)
	if err != nil {
		return true
	}
	var buf [256]byte
	b, err := readSmall(filepath.Join(dir, "cgroup.stat"), buf[:])
	if err != nil {
		return true
	}
	n, ok, err := keyed(b, "nr_descendants")
	if err != nil || !ok {
		return true
	}
	after, err := subdirs(dir)
	return err != nil || before != after || n != after
}

// subdirs is how many directories dir holds, from its link count.
func subdirs(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	if st.Nlink < 2 {
		return 0, unix.EINVAL // a filesystem that does not count them
	}
	return uint64(st.Nlink) - 2, nil
}

// TopProcs returns the pids in the group itself, from its cgroup.procs
// alone: one file read. It is Procs when Nested says no instance group has
// a group below it. A listing reads it for every run: a group of a few
// dozen processes is read into a buffer on the stack.
func (g *Group) TopProcs() ([]int, error) {
	if g.err != nil {
		return nil, g.err
	}
	path := g.path + "/cgroup.procs"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var buf [512]byte
	n, err := readFd(fd, buf[:])
	unix.Close(fd)
	switch {
	case err != nil:
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	case n == len(buf): // more than fits: read it again, whole
		b, err := readGrowing(path, make([]byte, 4*len(buf)))
		if err != nil {
			return nil, err
		}
		return parseProcs(b)
	}
	return parseProcs(buf[:n])
}

// readFd reads fd into buf until buf is full or the file ends.
func readFd(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
