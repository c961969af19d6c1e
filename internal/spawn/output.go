package spawn

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/epoll"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Output is one instance's captured stdout and stderr: the pipes its runs
// write (each stream its own), read by the shared epoll loop into a
// bounded buffer that the Capture's writer turns into log records, and the
// time of the last byte read, which the idle-output watchdog and the agent
// turn tracker read. See Capture.
type Output struct {
	c  *Capture // nil: output is discarded
	id string
	// protocol: the instance's runs speak a protocol on stdout, which the
	// protocol client reads (protocol.go); set by NewOutput's caller
	// before any run, then read-only.
	protocol bool
	e        *entry
	last     atomic.Int64 // unix nanos of the last byte read; 0 = never

	mu      sync.Mutex // guards the fields below; taken by the epoll handlers
	pend    []byte     // frames read and not yet taken by the writer
	queued  bool       // on the writer's queue
	waiting bool       // on the Capture's list of outputs to resume
	streams []*stream  // the read ends being watched (an old run's heirs may hold one on)
	tty     *ttyStream // the current run's terminal, for a run with one (tty.go)
	closed  bool
	frozen  bool          // Freeze: no read end is put back in the loop until Thaw
	flushed chan struct{} // closed by the writer once the last frames are written
	took    chan struct{} // the writer took pend (room for one signal)
	final   bool          // the writer has taken the last frames
	errTail []byte        // a protocol run's newest stderr bytes (protocol.go's StderrTail)

	// The writer's: touched only by the goroutine holding its run lock.
	lines   [2]logfile.Lines // stdout's and stderr's unfinished lines
	ttyText *vt.TextLines    // forwarded text of the terminal's bytes; made when first needed
	failing bool             // a write failed and OnError was told
}

// stream is one watched read end. The descriptor lives in the epoll
// loop's table: it is read only there, by the handler or through w.Do.
type stream struct {
	s      logfile.Stream
	w      *epoll.Watch // owns the read end; set under Output.mu before the handler's first call
	paused bool
	ended  bool
}

// NewOutput returns the output of instance id, with the rotation limits of
// its log; c nil discards the output. It opens nothing.
func NewOutput(c *Capture, id string, l program.Logs) *Output { return newOutput(c, id, l, false) }

func newOutput(c *Capture, id string, l program.Logs, shared bool) *Output {
	o := &Output{c: c, id: id, flushed: make(chan struct{}), took: make(chan struct{}, 1)}
	if c != nil {
		o.e = c.acquire(id, l, shared)
		o.lines[logfile.Stdout].Max = logfile.DefaultLineMax
		o.lines[logfile.Stderr].Max = logfile.DefaultLineMax
	}
	return o
}

// Path is the current log file.
func (o *Output) Path() string {
	if o.e == nil {
		return os.DevNull
	}
	return o.e.log.Path()
}

// LastActivity is when the instance last wrote output (zero if never).
func (o *Output) LastActivity() time.Time {
	if n := o.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Note stores a line of tend's own about the instance. It is not the run's
// activity, so it neither keeps a silent run from being wedged nor starts a
// turn.
func (o *Output) Note(line string) {
	if o.c == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.frameLocked(logfile.Tend, []byte(line), time.Now())
	o.enqueueLocked()
}

// Close stops reading, writes what was read (an unfinished line as a
// partial record) and lets go of the log. It returns once that is on
// disk. The instance's FIFOs are removed: no run is left to write them.
func (o *Output) Close() error {
	if o.c == nil {
		return nil
	}
	if o.isClosed() {
		return nil
	}
	o.drainRest()
	o.mu.Lock()
	sts := o.streams
	o.mu.Unlock()
	for _, st := range sts {
		st.w.Close() // waits for a handler in flight; none runs after
	}
	o.mu.Lock()
	o.closed, o.streams = true, nil
	now := time.Now()
	o.frameLocked(logfile.Stdout|endFlag, nil, now)
	o.frameLocked(logfile.Stderr|endFlag, nil, now)
	queued := o.enqueueLocked()
	o.mu.Unlock()
	if !queued { // the writers have stopped: write here
		w := o.e.w
		w.run.Lock()
		w.flush(o)
		w.run.Unlock()
	}
	<-o.flushed
	if d := o.c.opts.FIFO; d != nil {
		base := baseName(o.id)
		for _, name := range []string{base + ".out", base + ".err", base + ".in", base} {
			_ = d.Remove(name)
		}
	}
	return nil
}

func (o *Output) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// drainRest reads what is in the pipes now: the run has ended, and the
// loop may not have got to the last of what it wrote. A full buffer waits
// for the writer (the loop's budget aside: this is the last of it). What
// heirs of the run write later is not waited for. The reads happen on the
// loop's thread (Do), where the read ends are; o.mu is not held meanwhile,
// as the loop's handlers take it.
func (o *Output) drainRest() {
	for {
		o.mu.Lock()
		sts := slices.Clone(o.streams)
		o.mu.Unlock()
		blocked := false
		for _, st := range sts {
			_ = st.w.Do(func(fd int) { // ErrClosed: the handler saw the end
				o.mu.Lock()
				defer o.mu.Unlock()
				blocked = !st.ended && !o.readAllLocked(st, fd)
			})
			if blocked {
				break
			}
		}
		if !blocked {
			return
		}
		o.mu.Lock()
		if !o.enqueueLocked() {
			o.mu.Unlock()
			w := o.e.w // the writers have stopped: write here
			w.run.Lock()
			w.flush(o)
			w.run.Unlock()
			continue
		}
		o.mu.Unlock()
		<-o.took
	}
}

// readAllLocked reads st's read end fd until the pipe is empty or at its
// end (true), or pend is full (false).
func (o *Output) readAllLocked(st *stream, fd int) bool {
	for {
		if o.pend == nil {
			o.pend = getBuf()
		}
		start := len(o.pend)
		room := cap(o.pend) - start - frameHdr
		if room < minRead {
			return false
		}
		n, err := unix.Read(fd, o.pend[start+frameHdr:start+frameHdr+room])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil || n == 0:
			st.ended = true
			o.frameLocked(st.s|endFlag, nil, time.Now())
			return true
		}
		putHdr(o.pend[start:start], time.Now(), st.s, n)
		o.keepTailLocked(st.s, o.pend[start+frameHdr:start+frameHdr+n])
		o.pend = o.pend[:start+frameHdr+n]
		o.c.used.Add(int64(frameHdr + n))
	}
}

// frameLocked appends a frame of kind with data to pend.
func (o *Output) frameLocked(kind logfile.Stream, data []byte, ts time.Time) {
	if o.pend == nil {
		o.pend = getBuf()
	}
	o.pend = putHdr(o.pend, ts, kind, len(data))
	o.pend = append(o.pend, data...)
	o.c.used.Add(int64(frameHdr + len(data)))
}

func putHdr(b []byte, ts time.Time, kind logfile.Stream, n int) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(ts.UnixNano()))
	b = append(b, byte(kind))
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// enqueueLocked hands o to its writer unless it is queued already; false
// if the writer has stopped.
func (o *Output) enqueueLocked() bool {
	if o.queued {
		return true
	}
	if !o.e.w.push(o) {
		return false
	}
	o.queued = true
	return true
}

// drain is the epoll handler of one read end: one read's worth into pend
// per call, so the loop serves the other descriptors in between. With no
// room it pauses the read end instead (backpressure) until the writer has
// caught up. It returns false at the end of the stream.
func (o *Output) drain(st *stream, fd int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.c.room(len(o.pend)) {
		o.pauseLocked(st)
		return true
	}
	if o.pend == nil {
		o.pend = getBuf()
	}
	start := len(o.pend)
	room := cap(o.pend) - start - frameHdr
	if room < minRead { // a note made pend grow past its room
		o.pauseLocked(st)
		return true
	}
	b := o.pend[start+frameHdr : start+frameHdr+room]
	for {
		n, err := unix.Read(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if len(o.pend) == 0 { // a quiet instance holds no buffer
				putBuf(o.pend)
				o.pend = nil
			}
			return true
		case err != nil || n == 0:
			st.ended = true
			o.frameLocked(st.s|endFlag, nil, time.Now())
			o.enqueueLocked()
			return false
		}
		now := time.Now()
		putHdr(o.pend[start:start], now, st.s, n)
		o.keepTailLocked(st.s, b[:n])
		o.pend = o.pend[:start+frameHdr+n]
		o.c.used.Add(int64(frameHdr + n))
		o.last.Store(now.UnixNano())
		o.enqueueLocked()
		return true
	}
}

// pauseLocked takes st's read end out of the loop until resume. Before
// the watch exists (Attach's first read) there is nothing to pause: the
// data just stays in the pipe.
func (o *Output) pauseLocked(st *stream) {
	if st.w == nil || st.paused {
		return
	}
	if err := st.w.PauseLocked(); err != nil {
		return // cannot happen for a watched pipe; reading on is the safe side
	}
	st.paused = true
	if !o.waiting {
		o.waiting = true
		o.c.addWaiting(o)
	}
}

// resume puts o's paused read ends back in the loop if there is room now;
// else o waits on. listed says o was just taken off the waiting list.
func (o *Output) resume(listed bool) {
	o.mu.Lock()
	if listed {
		o.waiting = false
	}
	if o.frozen { // Thaw resumes it
		o.mu.Unlock()
		return
	}
	if !o.c.room(len(o.pend)) {
		if !o.waiting && o.pausedLocked() {
			o.waiting = true
			o.c.addWaiting(o)
		}
		o.mu.Unlock()
		return
	}
	var ws []*epoll.Watch
	for _, st := range o.streams {
		if st.paused {
			st.paused = false
			ws = append(ws, st.w)
		}
	}
	ttyResume := o.takeTTYResumeLocked()
	o.mu.Unlock()
	// Without o.mu: Resume waits for a handler in flight, which takes it.
	for _, w := range ws {
		_ = w.Resume()
	}
	if ttyResume != nil {
		ttyResume()
	}
}

// pausedLocked says whether a read end of o is paused.
func (o *Output) pausedLocked() bool {
	for _, st := range o.streams {
		if st.paused {
			return true
		}
	}
	return o.tty != nil && o.tty.paused
}

// watch reads the non-blocking read end rfd from the shared epoll loop
// until every writer has closed it; then the loop closes its copy. watch
// owns rfd, also on error: the loop keeps a copy in its own table (see
// internal/epoll) and rfd is closed.
func (o *Output) watch(rfd int, s logfile.Stream) error {
	l, err := epoll.Shared()
	if err != nil {
		unix.Close(rfd)
		return fmt.Errorf("watching output: %w", err)
	}
	st := &stream{s: s}
	// st joins o before the handler's first call (OnWatch, on the loop's
	// thread), so a pause it makes is found by resume. o.mu is not held
	// across Add: the loop may be in a handler of o's, which takes it.
	_, err = l.Add(rfd, func(fd int) bool { return o.drain(st, fd) }, epoll.OnWatch(func(w *epoll.Watch) {
		o.mu.Lock()
		defer o.mu.Unlock()
		st.w = w
		kept := o.streams[:0]
		for _, old := range o.streams {
			if !old.ended {
				kept = append(kept, old)
			}
		}
		o.streams = append(kept, st)
	}))
	if err != nil {
		unix.Close(rfd)
		return fmt.Errorf("watching output: %w", err)
	}
	return nil
}
