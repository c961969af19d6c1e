package spawn

import (
	"encoding/binary"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// CaptureOptions configure a Capture. Only Logs is required.
type CaptureOptions struct {
	Logs *statedir.Dir // where the log files go (state_dir/logs)
	// FIFO is where the runs' named pipes go (state_dir/fifo): they outlive
	// the daemon, so the next one reads on (Attach). nil = anonymous
	// pipes, whose output a daemon restart loses.
	FIFO *statedir.Dir
	// Forward, when set (forward_output), also gets every captured line
	// as "NAME:K | line\n", whole lines only, one writer at a time. A
	// Forward that blocks holds the runs back as a slow disk would.
	Forward io.Writer
	// OnError hears that an instance's log could not be written (records
	// were lost): once, until a write works again. It must not block.
	OnError   func(id string, err error)
	Writers   int   // goroutines writing logs; 0 = 2
	Budget    int64 // bytes read and not yet written over every instance before reading pauses; 0 = 16 MiB
	OpenFiles int   // log files kept open between writes, over all writers; 0 = 64

	beforeWrite func(id string) // tests: called by the writer before each batch
}

// Per-instance bounds of the write path.
const (
	pendMax  = 64 << 10 // bytes an instance may have read and not yet handed to its writer
	minRead  = 1 << 10  // less room than this and the instance pauses instead of reading
	frameHdr = 13       // a frame in pend: unix nanos (8), kind (1), length (4), then the bytes
	endFlag  = 0x10     // kind bit: the stream ended (its unfinished line is flushed)
)

// Capture is the daemon's side of every instance's output: the FIFOs (or
// pipes) the runs write, read from the shared epoll loop into a bounded
// buffer per instance, and a few writer goroutines that turn those bytes
// into records on disk (package logfile) and, with Forward, on tend's
// stdout. The epoll loop never touches the disk: a slow disk cannot delay a
// notify heartbeat. An instance whose buffer is full (or all instances,
// once Budget bytes wait) stops being read until its writer has caught up:
// its run blocks on a full pipe, as it would under any reader that is
// behind. Nothing is dropped.
//
// Descriptors: a running instance holds the read ends of its two pipes;
// log files are opened by the writers, at most OpenFiles at a time; a
// stopped instance holds none.
type Capture struct {
	opts    CaptureOptions
	used    atomic.Int64 // bytes read (or noted) and not yet written, over every instance
	writers []*writer
	fwdMu   sync.Mutex // one Forward write at a time

	mu      sync.Mutex        // guards logs, next and waiting
	logs    map[string]*entry // the log of each instance that has an Output, by id
	next    int               // the writer the next log goes to
	waiting []*Output         // outputs with a paused stream, oldest first
}

// entry is a log in use by one or more Outputs (an instance being replaced
// overlaps its successor). All its writes go through one writer, which
// owns the log's write state.
type entry struct {
	log  *logfile.Log
	w    *writer
	refs int // guarded by Capture.mu
	// ends counts the streams whose end is written: each run's stdout and
	// stderr end once every process holding them is gone, and what came
	// before is then in the log (StreamEnds).
	ends atomic.Int64
}

// NewCapture starts the writers.
func NewCapture(o CaptureOptions) *Capture {
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.Budget <= 0 {
		o.Budget = 16 << 20
	}
	if o.OpenFiles <= 0 {
		o.OpenFiles = 64
	}
	c := &Capture{opts: o, logs: map[string]*entry{}}
	for range o.Writers {
		w := &writer{c: c, wake: make(chan struct{}, 1), done: make(chan struct{}), maxOpen: max(1, o.OpenFiles/o.Writers)}
		c.writers = append(c.writers, w)
		go w.loop()
	}
	return c
}

// Close writes what is pending and stops the writers. Outputs closed
// after it write on their caller's goroutine.
func (c *Capture) Close() {
	for _, w := range c.writers {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		w.poke()
	}
	for _, w := range c.writers {
		<-w.done
	}
}

// Log returns the log of instance id for reading: the one being written
// if the instance has an Output, else one read from the files alone.
func (c *Capture) Log(id string) *logfile.Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.logs[id]; e != nil {
		return e.log
	}
	return logfile.New(c.opts.Logs, baseName(id), logfile.Options{})
}

// StreamEnds is how many output streams of instance id have ended with
// all they carried written to its log: two per run that got its pipes
// (stdout and stderr), counted from when the instance got its Output;
// false when it has none (never made, or closed: then all is written).
func (c *Capture) StreamEnds(id string) (int64, bool) {
	c.mu.Lock()
	e := c.logs[id]
	c.mu.Unlock()
	if e == nil {
		return 0, false
	}
	return e.ends.Load(), true
}

// acquire returns the entry of id, made if needed, with these limits;
// shared: the terminal keeper appends to the log too (KeeperWrites).
func (c *Capture) acquire(id string, l program.Logs, shared bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.logs[id]
	if e == nil {
		e = &entry{
			log: logfile.New(c.opts.Logs, baseName(id), logfile.Options{MaxSize: l.MaxSize, MaxFiles: l.MaxFiles, Writer: true, Shared: shared}),
			w:   c.writers[c.next%len(c.writers)],
		}
		c.next++
		c.logs[id] = e
	} else {
		e.log.SetLimits(l.MaxSize, l.MaxFiles)
	}
	e.refs++
	return e
}

// release drops an Output's hold on its entry; the last one forgets it.
// On the entry's writer.
func (c *Capture) release(id string, e *entry) {
	c.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last && c.logs[id] == e {
		delete(c.logs, id)
	}
	c.mu.Unlock()
	if last {
		e.w.forget(e.log)
		e.log.EndWriter()
	}
}

// baseName is the files' name of an instance: NAME-K.
func baseName(id string) string {
	name, k, ok := program.SplitID(id)
	if !ok {
		return id
	}
	return program.InstanceBase(name, k)
}

// addWaiting puts o on the list of outputs to resume when room frees.
func (c *Capture) addWaiting(o *Output) {
	c.mu.Lock()
	c.waiting = append(c.waiting, o)
	c.mu.Unlock()
}

// wakeWaiting resumes paused outputs, oldest first, as many as the room
// freed plausibly serves (not all of ten thousand for one write's worth).
func (c *Capture) wakeWaiting() {
	free := c.opts.Budget - c.used.Load()
	if free <= 0 {
		return
	}
	c.mu.Lock()
	n := min(len(c.waiting), int(free/(pendMax/4))+1)
	batch := slices.Clone(c.waiting[:n])
	c.waiting = slices.Delete(c.waiting, 0, n)
	c.mu.Unlock()
	for _, o := range batch {
		o.resume(true)
	}
}

// room says whether an instance with pend bytes waiting may read more.
func (c *Capture) room(pend int) bool {
	return pend+frameHdr+minRead <= pendMax && c.used.Load() < c.opts.Budget
}

// writer is one goroutine writing the logs assigned to it.
type writer struct {
	c    *Capture
	wake chan struct{} // room for one: a poke while busy is not lost

	mu      sync.Mutex // guards queue and stopped
	queue   []*Output  // outputs with frames to write, each once
	stopped bool
	done    chan struct{} // closed when the goroutine ends

	spare []*Output // the goroutine's: the queue's other slice

	// run is held while a batch is written: by the goroutine, or by an
	// Output's Close once the writers stopped. It guards what follows.
	run     sync.Mutex
	open    []*logfile.Log // logs whose file is open, oldest first
	maxOpen int
	fwd     []byte
}

func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// push queues o; false once the writer has stopped.
func (w *writer) push(o *Output) bool {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, o)
	w.mu.Unlock()
	w.poke()
	return true
}

func (w *writer) loop() {
	defer close(w.done)
	for {
		w.mu.Lock()
		q, stopped := w.queue, w.stopped
		if len(q) > 0 {
			w.queue, w.spare = w.spare[:0], nil // two slices take turns
		}
		w.mu.Unlock()
		if len(q) == 0 {
			if stopped {
				return
			}
			<-w.wake
			continue
		}
		w.run.Lock()
		for _, o := range q {
			w.flush(o)
		}
		clear(q)
		w.spare = q[:0]
		w.run.Unlock()
	}
}

// flush writes what o has read since the last flush. The caller holds run.
func (w *writer) flush(o *Output) {
	o.mu.Lock()
	buf, final := o.pend, o.closed && !o.final
	o.pend, o.queued = nil, false
	o.final = o.final || final
	o.mu.Unlock()
	select {
	case o.took <- struct{}{}:
	default:
	}
	if len(buf) > 0 {
		o.resume(false) // its own room is back
		if w.c.opts.beforeWrite != nil {
			w.c.opts.beforeWrite(o.id)
		}
		w.write(o, buf)
		w.c.used.Add(-int64(len(buf)))
		putBuf(buf)
		w.c.wakeWaiting()
	}
	if final {
		w.c.release(o.id, o.e)
		close(o.flushed)
	}
}

// write turns o's frames into records of its log (and forwarded lines).
func (w *writer) write(o *Output, buf []byte) {
	log := o.e.log
	wasOpen := log.IsOpen()
	var errs []error
	fwd := w.fwd[:0]
	forward := w.c.opts.Forward != nil
	ends := 0
	for len(buf) >= frameHdr {
		ts := time.Unix(0, int64(binary.LittleEndian.Uint64(buf)))
		kind := buf[8]
		n := int(binary.LittleEndian.Uint32(buf[9:]))
		data := buf[frameHdr : frameHdr+n]
		buf = buf[frameHdr+n:]
		s := logfile.Stream(kind &^ endFlag)
		if s == logfile.TTY {
			var f *[]byte
			if forward {
				f = &fwd
			}
			if kind&endFlag != 0 {
				o.endTTYText(f)
				ends += 2 // a terminal is both of the run's streams
				continue
			}
			if f != nil {
				o.writeTTY(data, f) // the keeper wrote it to the log
			}
			continue
		}
		if s == logfile.Tend || s == logfile.Protocol {
			if err := log.Add(logfile.Record{TS: ts, Stream: s, Line: data}); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		emit := func(line []byte, partial bool) {
			if err := log.Add(logfile.Record{TS: ts, Stream: s, Partial: partial, Line: line}); err != nil {
				errs = append(errs, err)
			}
			if forward {
				fwd = append(append(append(fwd, o.id...), " | "...), line...)
				fwd = append(fwd, '\n')
			}
		}
		if kind&endFlag != 0 {
			o.lines[s].End(emit)
			ends++
		} else {
			o.lines[s].Feed(data, emit)
		}
	}
	if err := log.Flush(); err != nil {
		errs = append(errs, err)
	}
	o.e.ends.Add(int64(ends)) // after the flush: what the streams carried is written
	w.track(log, wasOpen)
	if len(fwd) > 0 {
		w.c.fwdMu.Lock()
		_, _ = w.c.opts.Forward.Write(fwd)
		w.c.fwdMu.Unlock()
	}
	if cap(fwd) <= 64<<10 {
		w.fwd = fwd[:0]
	} else {
		w.fwd = nil
	}
	if len(errs) > 0 && !o.failing {
		o.failing = true
		if w.c.opts.OnError != nil {
			w.c.opts.OnError(o.id, errs[0])
		}
	} else if len(errs) == 0 {
		o.failing = false
	}
}

// track keeps the number of log files this writer holds open bounded:
// a log that opened its file joins the list, and the oldest is closed.
func (w *writer) track(log *logfile.Log, wasOpen bool) {
	if !log.IsOpen() || wasOpen && slices.Contains(w.open, log) {
		return
	}
	w.open = append(slices.DeleteFunc(w.open, func(l *logfile.Log) bool { return l == log }), log)
	if len(w.open) > w.maxOpen {
		w.open[0].CloseFile()
		w.open = slices.Delete(w.open, 0, 1)
	}
}

// forget closes log's file: no Output writes it any more. On the writer's
// goroutine (or its stand-in).
func (w *writer) forget(log *logfile.Log) {
	log.CloseFile()
	w.open = slices.DeleteFunc(w.open, func(l *logfile.Log) bool { return l == log })
}

// Buffers of pendMax bytes, shared: a quiet instance holds none.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, pendMax); return &b }}

func getBuf() []byte { return (*bufPool.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) == pendMax {
		b = b[:0]
		bufPool.Put(&b)
	}
}
