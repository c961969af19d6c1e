package spawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/tend-sh/tend/internal/program"
)

// Output is one instance's captured stdout and stderr: a size-rotated log
// file that outlives its runs, and the time of the last byte written, which
// the idle-output watchdog and the agent turn tracker read.
type Output struct {
	path string
	fifo string             // the runs' stdout and stderr; "" = an anonymous pipe per run
	log  *lumberjack.Logger // has its own lock; written by the current run's copier
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
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		go o.copyFrom(pr)
		return pw, nil
	}
	if err := o.makeFIFO(); err != nil {
		return nil, err
	}
	pr, err := os.OpenFile(o.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// Read-write: opening never blocks, and the run itself then counts as
	// a reader, so its writes never raise SIGPIPE without a daemon.
	pw, err := os.OpenFile(o.fifo, os.O_RDWR, 0)
	if err != nil {
		pr.Close()
		return nil, err
	}
	go o.copyFrom(pr)
	return pw, nil
}

// Attach reads on from the FIFO of a run adopted from an earlier daemon.
func (o *Output) Attach() error {
	if o.fifo == "" {
		return nil
	}
	pr, err := os.OpenFile(o.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	go o.copyFrom(pr)
	return nil
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

// bufPool lends read buffers only while bytes are ready: an idle instance
// holds none, which keeps a thousand quiet pipes cheap.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// copyFrom drains r into o until every writer has closed it, then closes r.
func (o *Output) copyFrom(r *os.File) {
	defer r.Close()
	rc, err := r.SyscallConn()
	if err != nil {
		_, _ = io.Copy(o, r)
		return
	}
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			n, rerr = syscall.Read(int(fd), *bp)
			if rerr == syscall.EAGAIN {
				return false // wait for readiness without holding the buffer
			}
			if n > 0 {
				_, _ = o.Write((*bp)[:n])
			}
			return true
		})
		if err != nil || n == 0 || (rerr != nil && !errors.Is(rerr, syscall.EINTR)) {
			return
		}
	}
}
