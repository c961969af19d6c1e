package spawn

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/statedir"
)

// runPipes are a new run's stdout and stderr: the write ends its fork
// hands the child, and the read ends, which the epoll loop takes only
// once the child has its copies (watchRun), so that the run's pipes cost
// no trip to the loop's thread on the way to the fork. What the run
// writes meanwhile waits in the pipe, kept by the read end.
type runPipes struct {
	stdout, stderr *os.File   // the write ends
	reads          [2]readEnd // the read ends; fd -1: none (output discarded) or taken
	// A protocol run's (docs/protocol.md): its stdin, and the daemon's
	// ends of its stdin and stdout, which the protocol client takes
	// instead of the log (reads[0] is then not watched).
	stdin             *os.File
	protoIn, protoOut *os.File
}

type readEnd struct {
	fd int
	s  logfile.Stream
}

// openRun opens a new run's pipes. The caller forks, then calls watchRun.
// A protocol run's stdout always has a pipe, its stdin one too.
func (o *Output) openRun(protocol bool) (*runPipes, error) {
	p := &runPipes{reads: [2]readEnd{{fd: -1}, {fd: -1}}}
	if protocol {
		return p, o.openProtocol(p)
	}
	if o.c == nil {
		var err error
		if p.stdout, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return nil, err
		}
		if p.stderr, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			p.stdout.Close()
			return nil, err
		}
		return p, nil
	}
	var err error
	if p.stdout, p.reads[0], err = o.openStream(logfile.Stdout); err != nil {
		return nil, err
	}
	if p.stderr, p.reads[1], err = o.openStream(logfile.Stderr); err != nil {
		p.stdout.Close()
		unix.Close(p.reads[0].fd)
		return nil, err
	}
	return p, nil
}

// watchRun starts reading the run's pipes and closes the write ends: the
// child has its copies, and the end of each stream comes when it and its
// heirs close theirs. It is called whether or not the fork succeeded (a
// run that never started has streams that end at once). An error means
// a read end could not be watched: what the run writes there would never
// be read.
func (o *Output) watchRun(p *runPipes) error {
	var errs []error
	if p.stdin != nil {
		p.stdin.Close()
		p.protoOut = os.NewFile(uintptr(p.reads[0].fd), o.fifoName(logfile.Stdout))
		p.reads[0].fd = -1
	}
	for i := range p.reads {
		if r := p.reads[i]; r.fd >= 0 {
			p.reads[i].fd = -1
			errs = append(errs, o.watch(r.fd, r.s))
		}
	}
	p.stdout.Close()
	p.stderr.Close()
	return errors.Join(errs...)
}

// fifoName is the named pipe of one stream: NAME-K.out or NAME-K.err.
func (o *Output) fifoName(s logfile.Stream) string {
	if s == logfile.Stderr {
		return baseName(o.id) + ".err"
	}
	return baseName(o.id) + ".out"
}

// openStream makes one stream's pipe: the write end, and the read end
// (non-blocking) for watch.
func (o *Output) openStream(s logfile.Stream) (*os.File, readEnd, error) {
	none := readEnd{fd: -1}
	dir := o.c.opts.FIFO
	if dir == nil {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return nil, none, fmt.Errorf("pipe2: %w", err)
		}
		// Only the read end is non-blocking: the run's stdout stays blocking.
		if err := unix.SetNonblock(p[0], true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, none, fmt.Errorf("pipe2: %w", err)
		}
		return os.NewFile(uintptr(p[1]), "|"+s.String()), readEnd{fd: p[0], s: s}, nil
	}
	name := o.fifoName(s)
	if err := dir.Mkfifo(name, 0o600); err != nil {
		return nil, none, err
	}
	rfd, err := openFIFO(dir, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, none, err
	}
	// Read-write: opening never blocks, and the run itself then counts as
	// a reader, so its writes never raise SIGPIPE without a daemon.
	wfd, err := openFIFO(dir, name, unix.O_RDWR)
	if err != nil {
		unix.Close(rfd)
		return nil, none, err
	}
	return os.NewFile(uintptr(wfd), dir.Join(name)), readEnd{fd: rfd, s: s}, nil
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
// (a protocol run's stderr only: its stdout is the protocol client's)
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
		if o.protocol && f.s == logfile.Stdout {
			continue // the protocol client's (AttachProtocol)
		}
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
