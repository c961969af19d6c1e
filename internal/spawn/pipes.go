package spawn

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/statedir"
)

// openRun returns the write ends for a new run's stdout and stderr and
// starts reading what arrives. The caller closes its copies once the child
// has its own.
func (o *Output) openRun() (stdout, stderr *os.File, err error) {
	if o.c == nil {
		if stdout, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return nil, nil, err
		}
		if stderr, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			stdout.Close()
			return nil, nil, err
		}
		return stdout, stderr, nil
	}
	stdout, err = o.openStream(logfile.Stdout)
	if err != nil {
		return nil, nil, err
	}
	stderr, err = o.openStream(logfile.Stderr)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// fifoName is the named pipe of one stream: NAME-K.out or NAME-K.err.
func (o *Output) fifoName(s logfile.Stream) string {
	if s == logfile.Stderr {
		return baseName(o.id) + ".err"
	}
	return baseName(o.id) + ".out"
}

// openStream makes one stream's pipe and watches its read end.
func (o *Output) openStream(s logfile.Stream) (*os.File, error) {
	dir := o.c.opts.FIFO
	if dir == nil {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return nil, fmt.Errorf("pipe2: %w", err)
		}
		// Only the read end is non-blocking: the run's stdout stays blocking.
		if err := unix.SetNonblock(p[0], true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, fmt.Errorf("pipe2: %w", err)
		}
		if err := o.watch(p[0], s); err != nil {
			unix.Close(p[1])
			return nil, err
		}
		return os.NewFile(uintptr(p[1]), "|"+s.String()), nil
	}
	name := o.fifoName(s)
	if err := dir.Mkfifo(name, 0o600); err != nil {
		return nil, err
	}
	rfd, err := openFIFO(dir, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// Read-write: opening never blocks, and the run itself then counts as
	// a reader, so its writes never raise SIGPIPE without a daemon.
	wfd, err := openFIFO(dir, name, unix.O_RDWR)
	if err != nil {
		unix.Close(rfd)
		return nil, err
	}
	if err := o.watch(rfd, s); err != nil {
		unix.Close(wfd)
		return nil, err
	}
	return os.NewFile(uintptr(wfd), dir.Join(name)), nil
}

// openFIFO opens the named pipe name in dir without following a symlink,
// and refuses anything that is not a FIFO of tend's own user.
func openFIFO(dir *statedir.Dir, name string, flag int) (int, error) {
	fd, err := unix.Openat(dir.FD(), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir.Join(name), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: dir.Join(name), Err: errors.New("not a FIFO of tend's")}
	}
	return fd, nil
}

// Attach reads on from the FIFOs of a run adopted from an earlier daemon
// (and from the single FIFO of a daemon from before stdout and stderr had
// one each).
func (o *Output) Attach() error {
	if o.c == nil || o.c.opts.FIFO == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct {
		name string
		s    logfile.Stream
	}{{o.fifoName(logfile.Stdout), logfile.Stdout}, {o.fifoName(logfile.Stderr), logfile.Stderr}, {baseName(o.id), logfile.Stdout}} {
		rfd, err := openFIFO(o.c.opts.FIFO, f.name, unix.O_RDONLY|unix.O_NONBLOCK)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// A FIFO whose writers were all gone before this open reports no
		// hang-up, so find out now: nothing to read and no writer is the end.
		if !o.drain(&stream{s: f.s}, rfd) {
			unix.Close(rfd)
			continue
		}
		errs = append(errs, o.watch(rfd, f.s))
	}
	return errors.Join(errs...)
}
