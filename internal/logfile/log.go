package logfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// Options configure a Log.
type Options struct {
	MaxSize  int64 // a file rotates at exactly this many bytes; at least program.MinLogSize; 0 = program.DefaultLogSize
	MaxFiles int   // rotated files kept besides the current one; 0 = none
	// Writer says this process writes the log (through Add and Flush):
	// followers then wait for its notifications and skip it while it is
	// quiet, instead of looking at the file on every poll.
	Writer bool
	// Shared says other processes (and other Logs of this process) write
	// the same files too, each through a Log with Shared: each batch is
	// written under an flock(2) of the current file, which it also
	// rotates under (see shared.go), and readers open the files under it.
	// A Cursor of this process is woken by this Log's Flush and Changed
	// only: records another process writes wake nobody here, and (with
	// Writer) a follower trusts Version for up to a second between looks
	// at the files, until Changed says the other process wrote. Times
	// keep their order within each writer's records, not across.
	Shared bool
}

// Log is one instance's set of log files: BASE.log and the rotated
// BASE.log.1 … BASE.log.MaxFiles in a directory. It holds no descriptor
// while idle: the writer's file is opened on demand and closed by
// CloseFile (the capture keeps a bounded pool of them open).
//
// Add, Flush and CloseFile belong to one goroutine at a time (the writer);
// every other method is safe for concurrent use.
type Log struct {
	dir    *statedir.Dir
	base   string
	writer atomic.Bool // see Options.Writer and EndWriter
	shared bool        // see Options.Shared; set by New

	maxSize  atomic.Int64
	maxFiles atomic.Int64

	// rot is held by the writer while it rotates, and by readers while
	// they find and open the files, so no reader sees the set half-shifted.
	// A shared log's writer takes it under the current file's flock, and
	// its readers take holdSet's before it.
	rot sync.RWMutex
	gen uint64 // rotations by this process; guarded by rot

	// The writer's state, owned by the goroutine that writes.
	f      *os.File // the current file while open
	size   int64    // bytes in the current file, buf included; -1 = not known until opened
	buf    []byte   // records not yet written
	end    int64    // shared: where this writer's last write ended the open file; -1 = not known
	lastMS int64    // the time of the last record, unix ms: times never go back within a log (a shared one: within this writer's records)

	version atomic.Uint64 // bumped by each write and rotation, for followers

	mu      sync.Mutex // guards waiters
	waiters map[chan<- struct{}]struct{}
}

// New returns the log of base in dir. It opens nothing.
func New(dir *statedir.Dir, base string, o Options) *Log {
	l := &Log{dir: dir, base: base, size: -1, end: -1, shared: o.Shared}
	l.writer.Store(o.Writer)
	l.SetLimits(o.MaxSize, o.MaxFiles)
	return l
}

// EndWriter says this process no longer writes the log through this Log
// (its instance is gone; a successor may write the files through another):
// its followers look at the files from now on.
func (l *Log) EndWriter() {
	l.writer.Store(false)
	l.notify() // a follower waiting for this Log's writes polls instead
}

// SetLimits changes the rotation limits for the records to come.
func (l *Log) SetLimits(maxSize int64, maxFiles int) {
	if maxSize == 0 {
		maxSize = program.DefaultLogSize
	}
	l.maxSize.Store(max(maxSize, program.MinLogSize))
	l.maxFiles.Store(int64(max(maxFiles, 0)))
}

// Base is the log's name without the .log suffix.
func (l *Log) Base() string { return l.base }

// Path is the current file's path, for messages.
func (l *Log) Path() string { return l.dir.Join(l.name(0)) }

// name is the file of generation i: 0 the current one, then the rotated.
func (l *Log) name(i int) string {
	if i == 0 {
		return l.base + ".log"
	}
	return l.base + ".log." + strconv.Itoa(i)
}

// LineMax is the longest line one record of this log holds: a longer one
// is stored in pieces. It keeps every record within max_size, so that one
// crosses at most from one file into the next.
func (l *Log) LineMax() int {
	return int(min(DefaultLineMax, l.maxSize.Load()-int64(MaxHeader)))
}

// Add stores r: its line cut into pieces if it is longer than LineMax, and
// at each newline it holds (a note of several lines). Records are buffered
// until Flush, or until a rotation needs the file written out (a shared
// log: until they fill a file); an error means records were lost.
func (l *Log) Add(r Record) error {
	if i := bytes.IndexByte(r.Line, '\n'); i >= 0 {
		first := r
		first.Line, first.Partial = r.Line[:i], false
		r.Line = r.Line[i+1:]
		if len(r.Line) == 0 {
			return l.Add(first) // a final newline ends the last line
		}
		return errors.Join(l.Add(first), l.Add(r))
	}
	ms := r.TS.UnixMilli()
	if ms < l.lastMS {
		ms = l.lastMS // the clock stepped back: keep the file in order
	}
	l.lastMS = ms
	r.TS = msTime(ms)
	var err error
	lineMax := l.LineMax()
	for {
		piece := r
		if len(piece.Line) > lineMax {
			piece.Line, piece.Partial = r.Line[:lineMax], true
		}
		if l.shared {
			err = errors.Join(err, l.addShared(piece))
		} else {
			err = errors.Join(err, l.add(piece))
		}
		if len(r.Line) <= lineMax {
			return err
		}
		r.Line = r.Line[lineMax:]
	}
}

// add appends one record that fits a file. One that does not fit in the
// current file fills it to exactly max_size and goes on in the next:
// readers read the files as one stream (see stream), so the record is
// whole again. A file that is full already, or over a max_size lowered
// since, or not kept (max_files 0), rotates first.
func (l *Log) add(r Record) error {
	n := int64(storedLen(r))
	var err error
	if l.size < 0 {
		if err = l.open(); err != nil {
			l.size = 0 // the write will fail too, and say so
		}
	}
	if l.size+n <= l.maxSize.Load() || l.size == 0 {
		l.buf = Append(l.buf, r)
		l.size += n
		return err
	}
	room := l.maxSize.Load() - l.size
	if room <= 0 || l.maxFiles.Load() == 0 {
		err = errors.Join(err, l.write(), l.rotate())
		l.buf = Append(l.buf, r)
		l.size += n
		return err
	}
	l.buf = Append(l.buf, r)
	cut := len(l.buf) - int(n-room)
	rest := slices.Clone(l.buf[cut:])
	l.buf = l.buf[:cut]
	werr := l.write()
	err = errors.Join(err, werr, l.rotate())
	if werr == nil { // else the record's beginning is lost: its end alone would be no record
		l.buf = append(l.buf, rest...)
		l.size += int64(len(rest))
	}
	return err
}

// Flush writes the buffered records and wakes the followers.
func (l *Log) Flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	var err error
	if l.shared {
		err = l.writeShared()
	} else {
		err = l.write()
	}
	l.version.Add(1)
	l.notify()
	return err
}

// write writes buf to the current file. On an error the records are
// dropped (they cannot be kept forever) and the file is reopened next time.
func (l *Log) write() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.open()
	if err == nil {
		_, err = l.f.Write(l.buf)
	}
	if err != nil {
		l.CloseFile() // the size is read again at the next open
	}
	l.buf = l.buf[:0]
	if cap(l.buf) > 64<<10 {
		l.buf = nil // a burst's buffer is not kept by a quiet log
	}
	return err
}

// open opens the current file if it is not open, and learns its size.
// Something else planted at its name (a symlink to a dotfile, a FIFO) is
// removed, never written through or blocked on.
func (l *Log) open() error {
	if l.f != nil {
		return nil
	}
	name := l.name(0)
	mode := os.O_WRONLY
	if l.shared {
		mode = os.O_RDWR // see writeLocked's endsLine
	}
	f, err := l.dir.OpenFile(name, mode|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil && l.planted(name) {
		if rerr := l.dir.Remove(name); rerr == nil {
			f, err = l.dir.OpenFile(name, mode|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f = f
	l.size = fi.Size() + int64(len(l.buf))
	return nil
}

// IsOpen says whether the writer holds the current file open.
func (l *Log) IsOpen() bool { return l.f != nil }

// CloseFile closes the writer's file; the next write opens it again.
func (l *Log) CloseFile() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.size, l.end = -1, -1
}

// rotate shifts the files one generation older (dropping the oldest past
// MaxFiles) and starts an empty current file.
func (l *Log) rotate() error {
	l.rot.Lock()
	defer l.rot.Unlock()
	l.CloseFile()
	n := int(l.maxFiles.Load())
	var err error
	if n == 0 {
		err = l.dir.Remove(l.name(0))
	} else {
		err = l.dir.Remove(l.name(n))
		for i := n - 1; i >= 0; i-- {
			if rerr := l.dir.Rename(l.name(i), l.name(i+1)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		// Files past a max_files that was lowered since.
		for i := n + 1; i <= n+100; i++ {
			if _, lerr := l.dir.Lstat(l.name(i)); lerr != nil {
				break
			}
			_ = l.dir.Remove(l.name(i))
		}
	}
	l.size = 0
	l.gen++
	l.version.Add(1)
	return err
}

// Version changes whenever the log is written or rotated by this process
// (or Changed says another process wrote it).
func (l *Log) Version() uint64 { return l.version.Load() }

// Changed says another process wrote the files (its writer told this
// one so): the followers of this Log are woken, as by a Flush here.
func (l *Log) Changed() {
	l.version.Add(1)
	l.notify()
}

// Watch makes Flush and Changed send to ch (without blocking: give it
// room for one) after each write, until Unwatch. Only a log with
// Options.Writer or Options.Shared notifies.
func (l *Log) Watch(ch chan<- struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters == nil {
		l.waiters = map[chan<- struct{}]struct{}{}
	}
	l.waiters[ch] = struct{}{}
}

// Unwatch stops sending to ch.
func (l *Log) Unwatch(ch chan<- struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters, ch)
}

func (l *Log) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// planted says whether name is something other than a regular file: a
// symlink (O_NOFOLLOW refused it), a FIFO (ENXIO without a reader), a
// socket or a device.
func (l *Log) planted(name string) bool {
	st, err := l.dir.Lstat(name)
	return err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR
}

// Remove removes the log files of base in dir: BASE.log and the rotated
// BASE.log.1, .2, … up to the first missing one (rotation keeps them
// numbered without gaps). A missing BASE.log is no error. The log must
// not be written meanwhile: it is for an instance that is gone.
func Remove(dir *statedir.Dir, base string) error {
	l := &Log{base: base}
	if err := dir.Remove(l.nextName()); err != nil { // a shared rotation's, left by a crash
		return err
	}
	for i := 0; ; i++ {
		if i > 0 {
			if _, err := dir.Lstat(l.name(i)); errors.Is(err, fs.ErrNotExist) {
				return nil
			}
		}
		if err := dir.Remove(l.name(i)); err != nil {
			return err
		}
	}
}
