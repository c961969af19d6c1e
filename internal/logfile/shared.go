package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A shared log (Options.Shared) has writers in several processes: the
// daemon's notes and the terminal keeper's tty records go to one instance's
// log (docs/terminal.md). Its writers agree through flock(2) of the
// current file, BASE.log:
//
//   - A batch (Flush, or a buffer grown to max_size) is written under an
//     exclusive lock of the file, taken after checking that the descriptor
//     is still the file at BASE.log (else it was rotated away: reopen), and
//     with the file's size read under the lock, never a cached one.
//   - The rotation decision and the rotation are made under that lock, over
//     the whole batch at once: what fits is written, the files shift, the
//     rest goes on in the new file. A record cut at exactly max_size goes
//     on at the start of the next file, with nothing of another writer's
//     between; with max_files 0 (nothing kept) a record is never cut, the
//     file rotates at a record boundary instead.
//   - The new file is made under another name (BASE.log.new), locked, and
//     only then renamed over BASE.log, so no other writer can put a byte in
//     it first; the old file gets its rotated name by a link made before,
//     so BASE.log is never missing (a writer coming then would make one of
//     its own). Readers meet the old file under both names for a moment
//     and read it once (see seen).
//
// A batch is one write(2) per file part, so the records of one batch stay
// together in the file; two writers' records interleave only between
// batches. Times go back where they do: each writer keeps its own records'
// times in order, not another's.

// nextName is where a shared rotation makes the next current file.
func (l *Log) nextName() string { return l.base + ".log.new" }

// sharedRetries bounds how often one batch finds its file rotated away
// before it has the lock: each time another writer rotated, and wrote.
const sharedRetries = 1000

// errRotatedAway says a batch never got the current file for itself.
var errRotatedAway = errors.New("the current file was rotated away at every try")

// addShared buffers r for the next batch; a buffer as large as a file is
// written now (records of one batch may then span a file's end).
func (l *Log) addShared(r Record) error {
	l.buf = Append(l.buf, r)
	if int64(len(l.buf)) < l.maxSize.Load() {
		return nil
	}
	return l.writeShared()
}

// writeShared writes buf as one batch. On an error the records not yet
// written are dropped (as write's are) and the file is reopened next time.
func (l *Log) writeShared() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.writeLocked(l.buf)
	if err != nil {
		l.CloseFile()
	}
	l.buf = l.buf[:0]
	if cap(l.buf) > 64<<10 {
		l.buf = nil
	}
	return err
}

// writeLocked writes the records b holds under the lock of the current
// file, rotating where they fill it.
func (l *Log) writeLocked(b []byte) (err error) {
	size, err := l.lock()
	if err != nil {
		return err
	}
	defer func() {
		if l.f != nil {
			_ = flock(l.f, unix.LOCK_UN)
		}
		if err == nil {
			l.end = size
		}
	}()
	if size > 0 && size != l.end {
		// Another writer wrote last: it may have died in the middle of a
		// record. A newline ends what it left, or this batch's first
		// record would be glued to it.
		if ends, err := l.endsLine(size); err != nil {
			return err
		} else if !ends {
			b = append([]byte{'\n'}, b...)
		}
	}
	maxSize, maxFiles := l.maxSize.Load(), l.maxFiles.Load()
	var shifts error // rotated files not shifted: the rotations went on
	for {
		room := maxSize - size
		if int64(len(b)) <= room {
			return errors.Join(shifts, l.writePart(b, &size))
		}
		n := room // to exactly max_size: the record cut there goes on in the next file
		if maxFiles == 0 || room <= 0 {
			// The file is full (or over a max_size lowered since), or
			// will not be kept: the whole records that fit.
			n = int64(bytes.LastIndexByte(b[:max(room, 0)], '\n') + 1)
		}
		if first := int64(bytes.IndexByte(b, '\n') + 1); size == 0 && (first == 0 || first > maxSize) {
			// A record longer than a file (max_size lowered since it was
			// added): whole in a file of its own, as add does.
			n = int64(len(b))
			if first > 0 {
				n = first
			}
		}
		if n > 0 {
			if err := l.writePart(b[:n], &size); err != nil {
				return errors.Join(shifts, err)
			}
			b = b[n:]
		}
		if len(b) == 0 {
			return shifts
		}
		shiftErr, err := l.rotateShared()
		if err != nil {
			return errors.Join(shifts, shiftErr, err)
		}
		shifts = errors.Join(shifts, shiftErr)
		size = 0
		if maxFiles == 0 {
			// What a dead writer left went with the file (a record
			// never begins with a newline, nor continues across files
			// here).
			b = bytes.TrimPrefix(b, []byte{'\n'})
		}
	}
}

// writePart writes b to the current file in one write(2), and adds it to
// size.
func (l *Log) writePart(b []byte, size *int64) error {
	n, err := l.f.Write(b)
	*size += int64(n)
	return err
}

// endsLine says whether the current file, size bytes long, ends with a
// newline (it is open for reading too, for this).
func (l *Log) endsLine(size int64) (bool, error) {
	var last [1]byte
	if _, err := l.f.ReadAt(last[:], size-1); err != nil {
		return false, err
	}
	return last[0] == '\n', nil
}

// lock opens the current file (if it is not open) and takes its lock,
// reopening while the descriptor is not the file at BASE.log (another
// writer rotated it away); it returns the file's size.
func (l *Log) lock() (int64, error) {
	name := l.name(0)
	for range sharedRetries {
		if err := l.open(); err != nil {
			return 0, err
		}
		if err := flock(l.f, unix.LOCK_EX); err != nil {
			return 0, &fs.PathError{Op: "flock", Path: l.dir.Join(name), Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(l.f.Fd()), &st); err != nil {
			_ = flock(l.f, unix.LOCK_UN)
			return 0, &fs.PathError{Op: "fstat", Path: l.dir.Join(name), Err: err}
		}
		at, err := l.dir.Lstat(name)
		if err == nil && at.Ino == st.Ino && at.Dev == st.Dev {
			return st.Size, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = flock(l.f, unix.LOCK_UN)
			return 0, err
		}
		l.CloseFile() // and its lock
	}
	return 0, fmt.Errorf("%s: %w", l.dir.Join(name), errRotatedAway)
}

// rotateShared shifts the files one generation older, as rotate does, and
// makes a new current file, locked by this writer; the caller holds the
// lock of the current one. The rest of the batch goes on in the new file,
// unless err says there is none; shiftErr says a rotated file could not be
// shifted (as rotate, it goes on without).
func (l *Log) rotateShared() (shiftErr, err error) {
	next, err := l.makeNext()
	if err != nil {
		return nil, err
	}
	l.rot.Lock()
	defer l.rot.Unlock()
	n := int(l.maxFiles.Load())
	if n > 0 && !l.halfRotated() {
		shiftErr = l.dir.Remove(l.name(n))
		for i := n - 1; i >= 1; i-- {
			if rerr := l.dir.Rename(l.name(i), l.name(i+1)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				shiftErr = errors.Join(shiftErr, rerr)
			}
		}
		for i := n + 1; i <= n+100; i++ { // past a max_files lowered since
			if _, lerr := l.dir.Lstat(l.name(i)); lerr != nil {
				break
			}
			_ = l.dir.Remove(l.name(i))
		}
		// The current file takes its rotated name before the new one
		// takes its place: BASE.log is never missing.
		// BASE.log.1 is there still if it could not be shifted: it goes,
		// as a rename over it would take it.
		lerr := unix.Linkat(l.dir.FD(), l.name(0), l.dir.FD(), l.name(1), 0)
		if lerr == unix.EEXIST && l.dir.Remove(l.name(1)) == nil {
			lerr = unix.Linkat(l.dir.FD(), l.name(0), l.dir.FD(), l.name(1), 0)
		}
		if lerr != nil {
			l.dropNext(next)
			return shiftErr, &os.LinkError{Op: "link", Old: l.dir.Join(l.name(0)), New: l.dir.Join(l.name(1)), Err: lerr}
		}
	}
	if err := l.dir.Rename(l.nextName(), l.name(0)); err != nil {
		l.dropNext(next)
		return shiftErr, err
	}
	l.f.Close() // and its lock: writers waiting for it find it rotated away
	l.f, l.end = next, 0
	l.gen++
	l.version.Add(1)
	return shiftErr, nil
}

// makeNext makes the next current file under nextName, locked. One there
// already was left by a writer that died rotating: only the holder of the
// current file's lock makes one.
func (l *Log) makeNext() (*os.File, error) {
	name := l.nextName()
	var f *os.File
	var err error
	for range 2 {
		f, err = l.dir.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			break
		}
		if err = l.dir.Remove(name); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		_ = l.dir.Remove(name)
		return nil, &fs.PathError{Op: "flock", Path: l.dir.Join(name), Err: err}
	}
	return f, nil
}

// dropNext undoes makeNext after a failed rotation.
func (l *Log) dropNext(f *os.File) {
	f.Close()
	_ = l.dir.Remove(l.nextName())
}

// halfRotated says whether BASE.log.1 is the current file: a writer died
// between a rotation's link and its rename. The shift was made then; the
// rename alone finishes it.
func (l *Log) halfRotated() bool {
	var st unix.Stat_t
	if unix.Fstat(int(l.f.Fd()), &st) != nil {
		return false
	}
	at, err := l.dir.Lstat(l.name(1))
	return err == nil && at.Ino == st.Ino && at.Dev == st.Dev
}

// holdSet keeps a shared log's files from rotating while a reader opens
// them one after the other (this process's rot does so for its own
// rotations only): a shared lock of the current file, which a rotation's
// exclusive one waits for. It returns the release. A writer holds the
// lock for a write or a rotation; if the reader cannot have it for
// holdWait (a writer stopped while it held it), it reads without, and
// seen keeps it from reading a file twice at least.
func (l *Log) holdSet() (release func()) {
	if !l.shared {
		return func() {}
	}
	name := l.name(0)
	deadline := time.Now().Add(holdWait)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		f, err := l.dir.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			return func() {} // no file yet: nothing to rotate
		}
		err = flock(f, unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			var st unix.Stat_t
			at, lerr := l.dir.Lstat(name)
			if unix.Fstat(int(f.Fd()), &st) == nil && lerr == nil && at.Ino == st.Ino && at.Dev == st.Dev {
				return func() { f.Close() } // and the lock
			}
			f.Close()
			continue // rotated meanwhile: lock the new one
		}
		f.Close()
		if err != unix.EWOULDBLOCK || time.Now().After(deadline) {
			return func() {}
		}
		time.Sleep(wait)
	}
}

// holdWait bounds how long holdSet waits for a writer's lock.
const holdWait = 2 * time.Second

// flock is flock(2) on f, again when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
