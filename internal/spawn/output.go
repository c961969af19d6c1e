package spawn

import (
	"errors"
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
	log  *lumberjack.Logger // has its own lock; written by the current run's copier
	last atomic.Int64       // unix nanos of the last byte; 0 = never
}

// NewOutput opens (lazily) the log file at path with the rotation limits.
func NewOutput(path string, l program.Logs) *Output {
	mb := int((l.MaxSize + (1<<20 - 1)) >> 20) // lumberjack counts whole megabytes
	return &Output{path: path, log: &lumberjack.Logger{
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

// Write appends daemon-side notes (or a run's bytes) to the log.
func (o *Output) Write(p []byte) (int, error) {
	o.last.Store(time.Now().UnixNano())
	return o.log.Write(p)
}

// Close closes the log file.
func (o *Output) Close() error { return o.log.Close() }

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
