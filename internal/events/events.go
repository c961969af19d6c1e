// Package events is tend's numbered event log: it gives every event its seq
// and ts, appends it to the audit log (state_dir/audit/events-YYYY-MM-DD.jsonl,
// one JSON line each) and hands it to live subscribers.
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
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Options configure Open.
type Options struct {
	// Dir is the audit directory (state_dir/audit). It is created, mode
	// 0700, if missing. Required.
	Dir string
	// Retention is how long events are kept: an audit file is removed once
	// every event it can hold (its whole UTC day) is older than this.
	// 0 means 336h (14 days); negative is an error.
	Retention time.Duration
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

// pruneEvery is how often the log removes expired audit files.
const pruneEvery = 24 * time.Hour

// Log is the numbered event log of one audit directory. Its methods are safe
// for concurrent use.
type Log struct {
	dir       string
	retention time.Duration
	now       func() time.Time
	buffer    int

	mu  sync.Mutex
	seq uint64   // the last seq assigned; guarded by mu
	day string   // the day of the file appended to, never decreasing; guarded by mu
	f   *os.File // that file, or nil after an error (reopened by the next Publish); guarded by mu
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

	published   atomic.Uint64
	cutOffs     atomic.Uint64
	writeErrors atomic.Uint64

	backfills sync.WaitGroup // subscription backlog goroutines
	stop      chan struct{}  // closed by Close to end pruneLoop
	pruned    chan struct{}  // closed when pruneLoop has returned
}

// Open opens the audit directory, finds the highest seq already in it,
// removes expired files and starts the daily pruning.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("events: no audit directory")
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("events: negative retention %v", opts.Retention)
	}
	l := newLog(opts)
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	names, err := listFiles(l.dir)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if l.seq, err = lastSeq(l.dir, names); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	l.day = l.now().UTC().Format(dayLayout)
	if n := len(names); n > 0 {
		// A clock that went back keeps appending to the newest file, so
		// file order stays seq order.
		l.day = max(l.day, names[n-1][len(filePrefix):len(filePrefix)+len(dayLayout)])
	}
	if err := l.openDayLocked(l.day); err != nil { // not shared yet
		return nil, fmt.Errorf("events: %w", err)
	}
	if err := l.Prune(); err != nil {
		l.setErr(err) // expired files left behind must not stop the daemon
	}
	go l.pruneLoop()
	return l, nil
}

// newLog applies the defaults of Options.
func newLog(opts Options) *Log {
	l := &Log{
		dir:       opts.Dir,
		retention: cmp.Or(opts.Retention, DefaultRetention),
		now:       opts.Now,
		buffer:    opts.Buffer,
		filling:   make(map[*Subscription]struct{}),
		stop:      make(chan struct{}),
		pruned:    make(chan struct{}),
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
func lastSeq(dir string, names []string) (uint64, error) {
	for i := len(names) - 1; i >= 0; i-- {
		seq, ok, err := lastSeqInFile(filepath.Join(dir, names[i]))
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
	defer l.mu.Unlock()
	if l.closed {
		e.Seq = 0
		return e
	}
	e.Seq = l.seq + 1
	e.TS = l.now().UTC().Truncate(time.Millisecond)
	line, err := e.MarshalJSON() // compact: Data goes through json.Marshal
	if err != nil {
		l.err = fmt.Errorf("events: %w", err)
		e.Seq, e.TS = 0, time.Time{}
		return e
	}
	l.seq = e.Seq
	e.JSON = line[:len(line):len(line)] // the append below must not write into what readers share
	l.appendLocked(e.TS, append(line, '\n'))
	l.published.Add(1)
	for _, s := range l.subs {
		s.deliverLocked(e)
	}
	return e
}

// appendLocked writes one line to the file of ts's day. The whole line goes
// in one write(2) on an O_APPEND file, so lines never interleave and a crash
// can only tear the last one. There is no fsync per event: it would cost a
// disk flush on every event, while a daemon crash loses nothing that was
// written (the page cache outlives the process). A machine crash may lose
// or tear the last lines; readers skip a line that does not parse.
func (l *Log) appendLocked(ts time.Time, line []byte) {
	if day := ts.Format(dayLayout); day > l.day || l.f == nil {
		if err := l.openDayLocked(max(day, l.day)); err != nil {
			l.writeFailedLocked(err)
			return
		}
	}
	if _, err := l.f.Write(line); err != nil {
		// Part of the line may be in the file: drop the handle, so the
		// next append reopens it and starts on a fresh line.
		l.f.Close()
		l.f = nil
		l.writeFailedLocked(err)
	}
}

func (l *Log) writeFailedLocked(err error) {
	l.writeErrors.Add(1)
	l.err = fmt.Errorf("events: audit log: %w", err)
}

// openDayLocked makes the file of day the one appended to. If the file
// ends in a torn line (the daemon was killed mid-write), it writes a '\n'
// first, so the next line starts fresh and readers skip only the torn one.
func (l *Log) openDayLocked(day string) error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.day = day
	f, err := os.OpenFile(filepath.Join(l.dir, fileName(day)), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if err := endLine(f); err != nil {
		f.Close()
		return err
	}
	l.f = f
	return nil
}

// endLine appends '\n' to f unless it is empty or already ends in one.
func endLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()-1); err != nil {
		return err
	}
	if b[0] == '\n' {
		return nil
	}
	_, err = f.Write([]byte{'\n'})
	return err
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
// within retention is removed). Other files in the directory are left
// alone, and so is the file being appended to.
func (l *Log) Prune() error {
	cutoff := l.now().Add(-l.retention)
	l.mu.Lock()
	current := fileName(l.day)
	l.mu.Unlock()
	names, err := listFiles(l.dir)
	if err != nil {
		return fmt.Errorf("events: prune: %w", err)
	}
	var errs []error
	for _, name := range names {
		day, _ := dayOf(name)
		if name == current || day.Add(24*time.Hour).After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("events: prune: %w", err)
	}
	return nil
}

// pruneLoop prunes once a day until Close.
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
	l.mu.Unlock()

	close(l.stop)
	<-l.pruned
	l.backfills.Wait() // they see their subscription closed and return
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}
