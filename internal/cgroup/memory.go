package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Memory is what the memory controller counts for a group.
type Memory struct {
	Current  int64  // memory.current: bytes charged to the group now
	Peak     int64  // memory.peak: the most since the group was made (by Prepare, for the run); 0 where the kernel lacks it (< 5.19)
	Max      int64  // memory.max: the hard limit; 0 for none ("max")
	OOMKills uint64 // memory.events oom_kill: processes the OOM killer ended in the group
}

// Memory reads the group's memory files. Without the memory controller
// (Tree.HasMemory false) they are missing: an error wrapping
// fs.ErrNotExist.
func (g *Group) Memory() (Memory, error) {
	if g.err != nil {
		return Memory{}, g.err
	}
	var m Memory
	var buf [256]byte
	var err error
	if m.Current, err = readBytes(filepath.Join(g.path, "memory.current"), buf[:]); err != nil {
		return Memory{}, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	if m.Peak, err = readBytes(filepath.Join(g.path, "memory.peak"), buf[:]); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Memory{}, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	if m.Max, err = readBytes(filepath.Join(g.path, "memory.max"), buf[:]); err != nil {
		return Memory{}, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	b, err := readSmall(filepath.Join(g.path, "memory.events"), buf[:])
	if err != nil {
		return Memory{}, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	if m.OOMKills, _, err = keyed(b, "oom_kill"); err != nil {
		return Memory{}, fmt.Errorf("cgroup %s: memory.events: %w", g.path, err)
	}
	return m, nil
}

// MemoryCurrent reads memory.current alone: the cheap read for the
// max_rss watchdog. The Tree keeps the file open, one descriptor per
// group, and reads it with pread: a fifth of the cost of open, read and
// close on kernfs (BenchmarkMemoryRead), with nothing allocated.
func (g *Group) MemoryCurrent() (int64, error) {
	if g.err != nil {
		return 0, g.err
	}
	var buf [32]byte
	b, err := g.t.kept.read(g.path, "memory.current", buf[:])
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", g.path, err)
	}
	n, err := parseBytes(b)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: memory.current: %w", g.path, err)
	}
	return n, nil
}

// keptFiles are open descriptors of files read often.
type keptFiles struct {
	mu  sync.Mutex // guards fds; held across each read, so a descriptor is never closed (and its number reused) under it
	fds map[keptKey]int
}

type keptKey struct{ dir, name string }

// read reads dir/name from offset 0 of a kept descriptor, opening it the
// first time. A kernfs file whose group was removed since reads ENODEV:
// then it is opened again, once.
func (k *keptFiles) read(dir, name string, buf []byte) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := keptKey{dir, name}
	for retried := false; ; retried = true {
		fd, ok := k.fds[key]
		if !ok {
			var err error
			if fd, err = unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err}
			}
			if k.fds == nil {
				k.fds = map[keptKey]int{}
			}
			k.fds[key] = fd
		}
		n, err := unix.Pread(fd, buf, 0)
		for err == unix.EINTR {
			n, err = unix.Pread(fd, buf, 0)
		}
		if err == nil && n < len(buf) {
			return buf[:n], nil
		}
		unix.Close(fd)
		delete(k.fds, key)
		if err == nil {
			err = errors.New("longer than expected")
		}
		if retried || err != unix.ENODEV {
			return nil, &os.PathError{Op: "read", Path: filepath.Join(dir, name), Err: err}
		}
	}
}

// forget closes the descriptors kept for files of dir, which Prepare or
// Remove is about to remove.
func (k *keptFiles) forget(dir string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, fd := range k.fds {
		if key.dir == dir {
			unix.Close(fd)
			delete(k.fds, key)
		}
	}
}

func (k *keptFiles) closeAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, fd := range k.fds {
		unix.Close(fd)
		delete(k.fds, key)
	}
}

func readBytes(file string, buf []byte) (int64, error) {
	b, err := readSmall(file, buf)
	if err != nil {
		return 0, err
	}
	n, err := parseBytes(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(file), err)
	}
	return n, nil
}

// readSmall reads a small cgroup file into buf with plain system calls:
// os.ReadFile would stat it and allocate, and cgroup files report size 0
// anyway. A file longer than buf is an error.
func readSmall(file string, buf []byte) ([]byte, error) { return readFile(file, buf, false) }

// readGrowing reads a whole file like readSmall, into buf when it fits and
// into a larger buffer when not (cgroup.procs of a group with many members).
func readGrowing(file string, buf []byte) ([]byte, error) { return readFile(file, buf, true) }

func readFile(file string, buf []byte, grow bool) ([]byte, error) {
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: file, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			if !grow {
				return nil, &os.PathError{Op: "read", Path: file, Err: errors.New("longer than expected")}
			}
			buf = append(buf, make([]byte, max(len(buf), 64))...)
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: file, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// writeFile writes s to an existing cgroup file in one write(2), which is
// how the kernel takes a value: no O_CREAT, no truncation.
func writeFile(file, s string) error {
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: file, Err: err}
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(s))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: file, Err: err}
	}
	return nil
}

// readList reads a controller list; a missing or unreadable file is empty.
func readList(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	return parseList(b)
}
