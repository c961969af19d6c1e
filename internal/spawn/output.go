package spawn

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/tend-sh/tend/internal/epoll"
	"github.com/tend-sh/tend/internal/program"
)

// Output is one instance's captured stdout and stderr: a size-rotated log
// file that outlives its runs, and the time of the last byte written, which
// the idle-output watchdog and the agent turn tracker read.
type Output struct {
	path string
	fifo string             // the runs' stdout and stderr; "" = an anonymous pipe per run
	log  *lumberjack.Logger // has its own lock; written from the epoll loop (the runs' output) and by Note
	last atomic.Int64       // unix nanos of the last byte; 0 = never
}

// NewOutput opens (lazily) the log file at path with the rotation limits.
// With fifo set, runs write into that named pipe, which outlives the daemon:
// a run holds it open read-write, so it never gets SIGPIPE while no daemon
// reads, and the next daemon reopens it (Attach) and reads on.
func NewOutput(path, fifo string, l program.Logs) *Output {
	mb := int((l.MaxSize + (1<<20 - 1)) >> 20) // lumberjack counts whole megabytes
	return &Output{path: path, fifo: fifo, log: &lumberjack.Logger{
		Filename:   path,
		MaxSize:    max(mb, 1),
		MaxBackups: l.MaxFiles,
	}}
}

// Path is the current log file.
func (o *Output) Path() string { return o.path }

// LastActivity is when the instance last wrote output (zero if never).
func (o *Output) LastActivity() time.Time {
	if n := o.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Write appends a run's bytes to the log and marks the output activity
// that the idle-output watchdog and the agent turn tracker read.
func (o *Output) Write(p []byte) (int, error) {
	o.last.Store(time.Now().UnixNano())
	return o.log.Write(p)
}

// Note appends a line of tend's own to the log; it is not the run's
// activity, so it neither keeps a silent run from being wedged nor starts a
// turn.
func (o *Output) Note(line string) {
	_, _ = o.log.Write([]byte("tend: " + line + "\n"))
}

// Close closes the log file.
func (o *Output) Close() error { return o.log.Close() }

// openRun returns the write end for a new run's stdout and stderr and starts
// copying what arrives into the log. The caller closes its copy once the
// child has its own.
func (o *Output) openRun() (*os.File, error) {
	if o.fifo == "" {
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
		if err := o.watch(p[0]); err != nil {
			unix.Close(p[1])
			return nil, err
		}
		return os.NewFile(uintptr(p[1]), "|1"), nil
	}
	if err := o.makeFIFO(); err != nil {
		return nil, err
	}
	rfd, err := unix.Open(o.fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: o.fifo, Err: err}
	}
	// Read-write: opening never blocks, and the run itself then counts as
	// a reader, so its writes never raise SIGPIPE without a daemon.
	pw, err := os.OpenFile(o.fifo, os.O_RDWR, 0)
	if err != nil {
		unix.Close(rfd)
		return nil, err
	}
	if err := o.watch(rfd); err != nil {
		pw.Close()
		return nil, err
	}
	return pw, nil
}

// Attach reads on from the FIFO of a run adopted from an earlier daemon.
func (o *Output) Attach() error {
	if o.fifo == "" {
		return nil
	}
	rfd, err := unix.Open(o.fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: o.fifo, Err: err}
	}
	// A FIFO whose writers were all gone before this open reports no
	// hang-up, so find out now: nothing to read and no writer is the end.
	if !o.drain(rfd) {
		unix.Close(rfd)
		return nil
	}
	return o.watch(rfd)
}

// makeFIFO creates the named pipe, replacing anything else at its path.
func (o *Output) makeFIFO() error {
	st, err := os.Lstat(o.fifo)
	if err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		return nil
	}
	if err == nil {
		os.Remove(o.fifo)
	}
	if err := syscall.Mkfifo(o.fifo, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mkfifo %s: %w", o.fifo, err)
	}
	return nil
}

// watch copies what arrives on the non-blocking read end rfd into the log,
// from the shared epoll loop, until every writer has closed it; then the
// loop closes rfd. watch owns rfd, also on error.
func (o *Output) watch(rfd int) error {
	l, err := epoll.Shared()
	if err == nil {
		_, err = l.Add(rfd, o.drain)
	}
	if err != nil {
		unix.Close(rfd)
		return fmt.Errorf("watching output: %w", err)
	}
	return nil
}

// readBuf is the loop's read buffer: the epoll loop calls drain for one
// descriptor at a time, so a single buffer serves every instance.
var readBuf = make([]byte, 32<<10)

// drain copies one read's worth from rfd into the log and says whether
// there may be more: false once every writer has gone (EOF) or on an error.
// One read per call lets the loop serve the other pipes between two reads
// of a chatty one.
func (o *Output) drain(rfd int) bool {
	drainMu.Lock()
	defer drainMu.Unlock()
	for {
		n, err := unix.Read(rfd, readBuf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil || n == 0:
			return false
		}
		_, _ = o.Write(readBuf[:n])
		return true
	}
}

// drainMu guards readBuf: drain also runs once on Attach's goroutine.
var drainMu sync.Mutex
