// Package events is tend's numbered event log: it gives every event its seq
// and ts, appends it to the audit log (state_dir/audit/events-YYYY-MM-DD.jsonl,
// one JSON line each, a day split into parts events-YYYY-MM-DD.N.jsonl when
// it outgrows a part) and hands it to live subscribers.
//
// Bounds: files whose whole day is older than Options.Retention are removed,
// and while the directory holds more than Options.MaxSize the oldest files
// go first, checked at each new file and once a minute from sizes the log
// keeps (no listing per event).
//
// Ordering: seq is strictly increasing per audit directory, across daemon
// restarts (Open continues from the highest seq on disk). One lock assigns
// the seq, appends the line and delivers to subscribers, so seq order, file
// order and delivery order are the same. A subscription delivers every event
// with seq > since exactly once, in seq order: the backlog from the audit
// files, then live events, with no gap or duplicate between the two.
//
// Slow subscribers: Publish never blocks. Each subscriber has a bounded
// buffer (Options.Buffer); a subscriber whose buffer is full when an event
// arrives is cut off: its channel closes after the events already buffered,
// CutOff reports true and CutOffs counts it. It resumes by subscribing again
// with the last seq it saw; the audit log has everything after it (within
// Options.Retention).
package events

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// Options configure Open.
type Options struct {
	// Files is the audit directory (state_dir/audit), opened by the
	// caller, who closes it after the Log. If nil, Dir is opened (made
	// mode 0700 if missing, refused if it is not the user's own; see
	// statedir.Open) and closed with the Log.
	Files *statedir.Dir
	// Dir is the audit directory's path, used when Files is nil.
	Dir string
	// Retention is how long events are kept: an audit file is removed once
	// every event it can hold (its whole UTC day) is older than this.
	// 0 means 336h (14 days); negative is an error.
	Retention time.Duration
	// MaxSize caps the bytes in the audit directory: while it holds more,
	// the oldest files are removed (never the one being appended to). A
	// day's events are split into parts of MaxSize/8 (between 4 KiB and
	// 64 MiB) so that one busy day cannot defeat the cap. 0 means no cap
	// and no parts; negative is an error.
	MaxSize int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Buffer is how many events a subscriber may fall behind before it is
	// cut off; 0 or less means 1024.
	Buffer int
}

// DefaultRetention and DefaultBuffer are the values Options fall back to.
const (
	DefaultRetention = 336 * time.Hour
	DefaultBuffer    = 1024
)

// pruneEvery is how often the log removes expired audit files and checks
// the directory's size from a fresh listing.
const pruneEvery = time.Minute

// Part sizes, when MaxSize is set.
const (
	minPart = 4 << 10
	maxPart = 64 << 20
)

// Log is the numbered event log of one audit directory. Its methods are safe
// for concurrent use.
type Log struct {
	dir       *statedir.Dir
	ownDir    bool // dir was opened by Open and is closed by Close
	retention time.Duration
	maxSize   int64 // 0: no cap
	partSize  int64 // a part is full past this; 0: one file a day
	now       func() time.Time
	buffer    int

	mu   sync.Mutex
	seq  uint64   // the last seq assigned; guarded by mu
	day  string   // the day of the file appended to, never decreasing; guarded by mu
	part int      // that file's part of the day; guarded by mu
	f    *os.File // that file, or nil after an error (reopened by the next Publish); guarded by mu
	size int64    // that file's size; guarded by mu
	// older are the other audit files, oldest first, with their sizes as
	// last seen, and olderBytes their sum: what the size cap removes
	// from; guarded by mu.
	older      []AuditFile
	olderBytes int64
	// subs are the subscribers Publish delivers to, oldest first: those that
	// were there first (a supervisor's watcher, say) get the first wake-ups
	// when a crowd of later ones (dashboards) shares the CPUs. The slice is
	// replaced, never changed in place, so Publish can range over it while a
	// cut-off removes one; guarded by mu.
	subs []*Subscription
	// filling holds the subscriptions whose backlog goroutine runs, cut off
	// or not, so Close can stop them; guarded by mu.
	filling map[*Subscription]struct{}
	closed  bool  // guarded by mu
	err     error // the last append or prune error; guarded by mu

	// The seq reservation (seqfile.go) and the range of seqs the audit
	// log could not keep, not yet marked by a gap event; guarded by mu.
	seqf     *os.File
	reserved uint64
	seqDirty bool
	seqFirst uint64     // the first unmarked seq the file says, while dirty
	lost     []seqRange // oldest first, each not yet named by a gap event
	lostWhy  string
	// writeFailing: the last append failed (the health is told when one
	// succeeds again); guarded by mu.
	writeFailing bool

	published   atomic.Uint64
	cutOffs     atomic.Uint64
	writeErrors atomic.Uint64

	backfills sync.WaitGroup // subscription backlog goroutines
	stop      chan struct{}  // closed by Close to end pruneLoop
	pruned    chan struct{}  // closed when pruneLoop has returned
}

// Open opens the audit directory, finds the highest seq already in it,
// removes expired files and those over the size cap, and starts the
// pruning.
func Open(opts Options) (*Log, error) {
	if opts.Files == nil && opts.Dir == "" {
		return nil, errors.New("events: no audit directory")
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("events: negative retention %v", opts.Retention)
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("events: negative size cap %d", opts.MaxSize)
	}
	l := newLog(opts)
	if l.dir == nil {
		d, err := statedir.Open(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		l.dir, l.ownDir = d, true
	}
	if err := l.open(); err != nil {
		if l.ownDir {
			l.dir.Close()
		}
		return nil, fmt.Errorf("events: %w", err)
	}
	if err := l.Prune(); err != nil {
		l.setErr(err) // expired files left behind must not stop the daemon
	}
	go l.pruneLoop()
	return l, nil
}

// open finds the last seq and the file to append to: the newest one, if it
// is of today or later (a clock that went back keeps appending to the
// newest file, so file order stays seq order) and not full, else the next.
func (l *Log) open() error {
	files, err := ListFiles(l.dir)
	if err != nil {
		return err
	}
	if l.seq, err = lastSeq(l.dir, files); err != nil {
		return err
	}
	n, dirty, first, serr := l.openSeqFile()
	if serr != nil {
		l.health().Failed(l.dir.Rel(seqName), serr) // seq is still the audit's; a loss now could reuse it
	}
	l.reserved, l.seqDirty, l.seqFirst = n, dirty, first
	if dirty {
		// A daemon died while events were lost: their seqs may have
		// been handed out. Never again; the gap events say so.
		if err := l.resumeLocked(n, first); err != nil {
			return err
		}
	}
	l.day = l.now().UTC().Format(dayLayout)
	if n := len(files); n > 0 && files[n-1].day >= l.day {
		l.day, l.part = files[n-1].day, files[n-1].Part
		if l.partSize > 0 && files[n-1].Size >= l.partSize {
			l.part++
		}
	}
	for _, f := range files {
		if f.day != l.day || f.Part != l.part {
			l.older = append(l.older, f)
			l.olderBytes += f.Size
		}
	}
	if err := l.openPartLocked(l.day, l.part); err != nil { // not shared yet
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, statedir.ErrNotRegular) {
			return err // planted, not full: refused (docs/trust.md#state-directory)
		}
		// A full disk (its torn last line cannot be ended) must not keep
		// the daemon from supervising: events go out live, the next
		// Publish tries again, and the gap is marked once it can be.
		l.writeFailedLocked(err)
	}
	return nil
}

// newLog applies the defaults of Options.
func newLog(opts Options) *Log {
	l := &Log{
		dir:       opts.Files,
		retention: cmp.Or(opts.Retention, DefaultRetention),
		maxSize:   opts.MaxSize,
		now:       opts.Now,
		buffer:    opts.Buffer,
		filling:   make(map[*Subscription]struct{}),
		stop:      make(chan struct{}),
		pruned:    make(chan struct{}),
	}
	if l.maxSize > 0 {
		l.partSize = min(max(l.maxSize/8, minPart), maxPart)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.buffer <= 0 {
		l.buffer = DefaultBuffer
	}
	return l
}

// lastSeq returns the highest seq in the audit files: the last complete line
// of the newest file that has one.
func lastSeq(dir *statedir.Dir, files []AuditFile) (uint64, error) {
	for i := len(files) - 1; i >= 0; i-- {
		seq, ok, err := lastSeqInFile(dir, files[i].Name)
		if err != nil || ok {
			return seq, err
		}
	}
	return 0, nil
}

// Publish numbers the event (the next seq, ts = Now in UTC to the
// millisecond, as it is written), appends it to the audit log as one line and
// hands it to every subscriber without blocking. It returns the numbered
// event. After Close it drops the event and returns it with Seq 0; so it does
// if the event cannot be encoded (its Data is not a JSON object), which is a
// bug in the caller, reported by Err.
//
// If the audit file cannot be written the event is still delivered live;
// Err and WriteErrors report it and the next Publish reopens the file.
func (l *Log) Publish(e program.Event) program.Event {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		e.Seq = 0
		return e
	}
	e.Seq = l.seq + 1
	e.TS = l.now().UTC().Truncate(time.Millisecond)
	line, err := e.MarshalJSON() // compact: Data goes through json.Marshal
	if err != nil {
		l.err = fmt.Errorf("events: %w", err)
		l.mu.Unlock()
		e.Seq, e.TS = 0, time.Time{}
		return e
	}
	l.seq = e.Seq
	e.JSON = line[:len(line):len(line)] // the append below must not write into what readers share
	victims := l.appendLocked(e.Seq, e.TS, append(line, '\n'))
	l.published.Add(1)
	for _, s := range l.subs {
		s.deliverLocked(e)
	}
	l.mu.Unlock()
	l.remove(victims)
	return e
}

// appendLocked writes one line to the current file, first moving on to the
// next file when the day changed or the part is full. The whole line goes
// in one write(2) on an O_APPEND file, so lines never interleave and a crash
// can only tear the last one. There is no fsync per event: it would cost a
// disk flush on every event, while a daemon crash loses nothing that was
// written (the page cache outlives the process). A machine crash may lose
// or tear the last lines; readers skip a line that does not parse. It
// returns the files the size cap now removes, for the caller to remove
// once it has let go of mu.
func (l *Log) appendLocked(seq uint64, ts time.Time, line []byte) (victims []string) {
	switch day := ts.Format(dayLayout); {
	case day > l.day:
		victims = l.rotateLocked(day, 0)
	case l.full(int64(len(line))):
		victims = l.rotateLocked(l.day, l.part+1)
	case l.f == nil:
		if err := l.openPartLocked(l.day, l.part); err != nil {
			l.writeFailedLocked(err)
		}
	}
	if l.f == nil || !l.writeLineLocked(line) {
		l.lostLocked(seq)
		return victims
	}
	if len(l.lost) > 0 {
		l.gapsLocked()
	}
	return victims
}

// full reports whether the current part cannot take n more bytes. An empty
// part takes any line.
func (l *Log) full(n int64) bool {
	return l.partSize > 0 && l.size > 0 && l.size+n > l.partSize
}

// rotateLocked makes day's part the file appended to; the file before it
// joins the older ones, and the size cap is applied.
func (l *Log) rotateLocked(day string, part int) (victims []string) {
	if prev, ok := ParseFileName(partName(l.day, l.part)); ok && (day != l.day || part != l.part) {
		prev.Size = l.size
		l.older = append(l.older, prev)
		l.olderBytes += l.size
	}
	if err := l.openPartLocked(day, part); err != nil {
		l.writeFailedLocked(err)
	}
	return l.overCapLocked()
}

func (l *Log) writeFailedLocked(err error) {
	l.writeErrors.Add(1)
	l.err = fmt.Errorf("events: audit log: %w", err)
	l.writeFailing = true
	l.health().Failed(l.healthName(), err)
}

// openPartLocked makes the file of day's part the one appended to. If the
// file ends in a torn line (the daemon was killed mid-write), it writes a
// '\n' first, so the next line starts fresh and readers skip only the torn
// one.
func (l *Log) openPartLocked(day string, part int) error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.day, l.part, l.size = day, part, 0
	f, err := l.dir.OpenFile(partName(day, part), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	size, err := endLine(f)
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, size
	return nil
}

// endLine appends '\n' to f unless it is empty or already ends in one, and
// returns its size.
func endLine(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, err
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()-1); err != nil {
		return 0, err
	}
	if b[0] == '\n' {
		return fi.Size(), nil
	}
	_, err = f.Write([]byte{'\n'})
	return fi.Size() + 1, err
}

// overCapLocked takes the oldest files off the older ones while they and
// the current part, counted as full, hold more than MaxSize, and returns
// their names. Counting the part as full keeps the directory under the cap
// until the next file, without a check per event.
func (l *Log) overCapLocked() (victims []string) {
	if l.maxSize <= 0 {
		return nil
	}
	for len(l.older) > 0 && l.olderBytes+max(l.size, l.partSize) > l.maxSize {
		victims = append(victims, l.older[0].Name)
		l.olderBytes -= l.older[0].Size
		l.older = l.older[1:]
	}
	return victims
}

// remove removes audit files; one already gone is no error.
func (l *Log) remove(names []string) error {
	var errs []error
	for _, name := range names {
		if err := l.dir.Remove(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LastSeq returns the seq of the last event published (or found at Open).
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Published returns how many events were published since Open.
func (l *Log) Published() uint64 { return l.published.Load() }

// CutOffs returns how many subscribers were cut off since Open.
func (l *Log) CutOffs() uint64 { return l.cutOffs.Load() }

// WriteErrors returns how many events could not be appended to the audit
// log since Open.
func (l *Log) WriteErrors() uint64 { return l.writeErrors.Load() }

// Err returns the last error the log hit appending, encoding or pruning
// since Open, or nil.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Log) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// Since returns the events with seq > since from the audit log, in seq
// order, at most limit of them (0 or less: all). Lines that do not parse
// are skipped. Data of each event is a pointer to its kind's payload type
// (see program.Event.UnmarshalJSON).
func (l *Log) Since(since uint64, limit int) ([]program.Event, error) {
	out := []program.Event{} // never nil: it is served as a JSON array
	if since >= l.LastSeq() {
		return out, nil
	}
	err := scan(l.dir, since, func(e program.Event) bool {
		out = append(out, e)
		return limit <= 0 || len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return out, nil
}

// Prune removes the audit files whose whole day is older than Now minus
// Retention (the date in the name says which day a file holds, so no event
// within retention is removed), then, while the directory holds more than
// MaxSize, the oldest files. Other files in the directory are left alone,
// and so is the file being appended to. It also refreshes the sizes the
// cap is checked with between listings.
func (l *Log) Prune() error {
	files, err := ListFiles(l.dir)
	if err != nil {
		return fmt.Errorf("events: prune: %w", err)
	}
	cutoff := l.now().Add(-l.retention)
	var victims []string
	l.mu.Lock()
	current := partName(l.day, l.part)
	l.older, l.olderBytes = nil, 0
	for _, f := range files {
		switch {
		case f.Name == current:
		case !f.Day.Add(24 * time.Hour).After(cutoff):
			victims = append(victims, f.Name)
		default:
			l.older = append(l.older, f)
			l.olderBytes += f.Size
		}
	}
	victims = append(victims, l.overCapLocked()...)
	l.mu.Unlock()
	if err := l.remove(victims); err != nil {
		return fmt.Errorf("events: prune: %w", err)
	}
	return nil
}

// pruneLoop prunes every pruneEvery until Close.
func (l *Log) pruneLoop() {
	defer close(l.pruned)
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := l.Prune(); err != nil {
				l.setErr(err)
			}
		case <-l.stop:
			return
		}
	}
}

// Close ends every subscription (their channels close, CutOff stays
// false), stops the pruning and closes the audit file. Publish after Close
// drops events. Close is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for _, s := range l.subs {
		s.closeLocked()
	}
	for s := range l.filling {
		s.closeLocked()
	}
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.f = nil
	}
	if l.seqf != nil {
		l.seqf.Close()
		l.seqf = nil
	}
	l.mu.Unlock()

	close(l.stop)
	<-l.pruned
	l.backfills.Wait() // they see their subscription closed and return
	if l.ownDir {
		l.dir.Close()
	}
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}
