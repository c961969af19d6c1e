package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Table keeps records, one per key, that must outlive the daemon that
// writes them: the next daemon, started after a crash or a SIGKILL, reads
// them back. Changes come often (every spawn, every exit) and must be on
// disk the moment they are made, so a Table writes two files:
//
//   - NAME.log, the journal: each change is appended at once as one JSON
//     line (one write(2), no fsync: that survives the daemon, not the
//     machine), so a daemon killed the instant after a change has still
//     recorded it; a Durable table's Sync also flushes it to disk, for
//     what must survive a power cut (an operator's decisions), and a
//     decision (Commit) is flushed before it is acted on, in a group
//     commit (commit.go);
//   - NAME, the whole set, one record a line (MarshalLines), rewritten at
//     most once a second and renamed into place (never torn); then the
//     journal starts over from a snapshot of the set.
//
// So a crash loop across a thousand instances costs a thousand small
// appends a second, not a thousand rewrites, and the files stay bounded:
// NAME holds one line per key, the journal that plus the last second's
// changes (at 10,000 keys of a few hundred bytes, a few MiB each).
//
// No record is ever lost: either file alone holds every record (the
// journal begins with the snapshot), LoadTable applies the journal even
// when NAME cannot be read, a NAME that does not parse is set aside
// (SetAside) with what can be read of it still loaded, and OpenTable
// starts from what was loaded, so records nobody has claimed yet are
// written back. A write that fails (a full disk) never leaves half a
// record and loses nothing held in memory: what it held is written again
// once the disk takes it (commit.go, docs/daemon.md#when-the-disk-fills).
type Table[R any] struct {
	dir     *Dir
	name    string
	schema  Schema[R]
	dirty   chan struct{} // a change waits to be compacted; capacity 1
	closing chan struct{} // closed by Close: the writer stops waiting
	done    chan struct{} // closed when the writer has returned
	once    sync.Once     // Close

	put chan struct{} // a Put waits to be journaled; capacity 1

	mu      sync.Mutex          // guards recs, journal, jsize, pending and err
	recs    map[string]R        // by key
	journal *os.File            // NAME.log, appended to on every change; nil if it cannot be opened
	jsize   int64               // the journal's size up to its last whole line
	pending map[string]struct{} // keys Put (or whose write failed) and not yet journaled
	err     error               // the last write error

	cmu     sync.Mutex      // guards queue and leading: the group commit (Commit)
	queue   []*commitReq[R] // Commits waiting for the next batch
	leading bool            // a Commit is writing a batch; the others wait for it
}

// Schema says how a Table's records are keyed and which read back are
// records at all.
type Schema[R any] struct {
	Key      func(R) string // a record's key, never ""
	KeyField string         // the key's JSON name, for the journal's delete lines
	Valid    func(R) bool   // whether a record read back names anything; nil = all with a key
	// Durable: the records must survive a power cut too, not only a kill
	// of the daemon (an operator's decisions): Sync flushes the journal,
	// and a compaction flushes the new files before it renames them.
	Durable bool
}

// compactEvery is how often, at most, a Table's file is rewritten from its
// journal.
const compactEvery = time.Second

func journalOf(name string) string { return name + ".log" }

// goneLine is the journal line that deletes key: the key field and
// "gone": true (any other field of a record is ignored on it).
func (s Schema[R]) goneLine(key string) []byte {
	line, _ := json.Marshal(map[string]any{s.KeyField: key, "gone": true})
	return line
}

func (s Schema[R]) valid(r R) bool {
	return s.Key(r) != "" && (s.Valid == nil || s.Valid(r))
}

// TableLoad is what LoadTable found.
type TableLoad[R any] struct {
	Records []R // sorted by key
	// Problems are one line each: a file set aside, a journal that could
	// not be read. Records may still hold what could be read.
	Problems []string
	// Damaged says NAME was set aside; Applied is how many lines of the
	// journal were applied. The journal begins with a snapshot of every
	// record (compactLocked), so a damaged NAME with a journal that applied
	// loses nothing but a torn last line.
	Damaged bool
	Applied int
}

// LoadTable reads the records an earlier daemon left in NAME, then its
// journal on top. Missing files are no records; a torn journal line (a
// daemon killed mid-write) is skipped. A NAME that cannot be read or
// parsed whole is renamed aside and the records on its lines that parse
// are kept; the journal is applied either way. The error is returned only
// when a bad NAME cannot be set aside: writing over it would lose it.
func LoadTable[R any](d *Dir, name string, s Schema[R], now time.Time) (TableLoad[R], error) {
	var out TableLoad[R]
	recs := map[string]R{}
	list, damage, err := ReadLines[R](d, name, now)
	if err != nil {
		return out, err
	}
	for _, r := range list {
		if s.valid(r) {
			recs[s.Key(r)] = r
		}
	}
	journal := journalOf(name)
	out.Damaged = damage != nil
	switch {
	case damage == nil:
	case damage.Read:
		out.Problems = append(out.Problems, fmt.Sprintf("%s cannot be read (%v); set aside as %s, every record taken from %s", d.Join(name), cause(damage.Err), damage.Aside, journal))
	default:
		out.Problems = append(out.Problems, fmt.Sprintf("%s is corrupt (%v); set aside as %s, %d records read from it, then %s applied", d.Join(name), damage.Err, damage.Aside, len(recs), journal))
	}
	j, err := d.ReadFile(journal)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		out.Problems = append(out.Problems, fmt.Sprintf("%s cannot be read (%v); it is started over", d.Join(journal), cause(err)))
	default:
		out.Applied = s.apply(recs, j)
	}
	if len(recs) > 0 {
		out.Records = sortedByKey(recs, s.Key)
	}
	return out, nil
}

// apply applies journal lines to recs; lines that do not parse (a torn
// last one) are skipped. It returns how many applied.
func (s Schema[R]) apply(recs map[string]R, j []byte) (n int) {
	for line := range bytes.SplitSeq(j, []byte("\n")) {
		var r R
		var gone struct {
			Gone bool `json:"gone"`
		}
		if json.Unmarshal(line, &r) != nil || json.Unmarshal(line, &gone) != nil || s.Key(r) == "" {
			continue
		}
		switch {
		case gone.Gone:
			delete(recs, s.Key(r))
			n++
		case s.valid(r):
			recs[s.Key(r)] = r
			n++
		}
	}
	return n
}

// cause is the system error of a path error, which already names the file.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func sortedByKey[R any](m map[string]R, key func(R) string) []R {
	out := make([]R, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b R) int { return strings.Compare(key(a), key(b)) })
	return out
}

// OpenTable starts keeping NAME in d, beginning with recs (every record
// loaded: those nobody claims are written back as they are). It writes
// NAME and the journal's snapshot at once; when it cannot (a full disk),
// it goes on appending to the journal the earlier daemon left, which
// leads to the same records, and compacts once it can.
func OpenTable[R any](d *Dir, name string, s Schema[R], recs []R) *Table[R] {
	t := &Table[R]{dir: d, name: name, schema: s, dirty: make(chan struct{}, 1), put: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}), recs: map[string]R{}, pending: map[string]struct{}{}}
	for _, r := range recs {
		t.recs[s.Key(r)] = r
	}
	t.mu.Lock()
	if err := t.compactLocked(); err != nil {
		_ = t.openJournalLocked() // its error is the next write's
		t.touch()                 // the writer compacts once it can
	}
	t.mu.Unlock()
	go t.writer()
	return t
}

// Set records r, replacing the record of its key. It is in the journal
// when Set returns, unless the journal cannot be written: then the
// writer writes it once it can (Err says why it could not).
func (t *Table[R]) Set(r R) {
	line, _ := json.Marshal(r)
	k := t.schema.Key(r)
	t.mu.Lock()
	t.recs[k] = r
	if t.writeJournalLocked(append(line, '\n')) == nil {
		delete(t.pending, k)
	} else {
		t.pending[k] = struct{}{}
	}
	t.mu.Unlock()
	t.touch()
}

// Put records r like Set, except that the journal line is written by the
// table's writer goroutine soon after, not by the caller: a caller on a
// hot path (an instance's loop, at every end of a run) pays a map store.
// Puts of one key that come faster than the writer journals them coalesce
// into the last. Sync waits until every Put so far is in the journal.
func (t *Table[R]) Put(r R) {
	k := t.schema.Key(r)
	t.mu.Lock()
	t.recs[k] = r
	t.pending[k] = struct{}{}
	t.mu.Unlock()
	select {
	case t.put <- struct{}{}:
	default:
	}
}

// Sync writes what Put left for the writer to the journal now, and with
// a Durable schema flushes the journal to disk (fdatasync): what an
// operator decided survives a power cut too once the API has answered it.
// It returns the error when it cannot (what it could not write stays for
// the writer to retry).
func (t *Table[R]) Sync() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.journalPendingLocked(); err != nil {
		return err
	}
	if t.journal != nil && t.schema.Durable {
		if err := unix.Fdatasync(int(t.journal.Fd())); err != nil {
			t.failedLocked(err)
			return fmt.Errorf("%s: fdatasync: %w", t.dir.Join(journalOf(t.name)), err)
		}
	}
	return nil
}

// Write is Sync without the flush to disk: enough for what must survive
// a kill of the daemon, not of the machine.
func (t *Table[R]) Write() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.journalPendingLocked()
}

// pendingLinesLocked is the journal lines of the pending keys: each one's
// record, or its gone line once deleted.
func (t *Table[R]) pendingLinesLocked() []byte {
	var b []byte
	for k := range t.pending {
		if r, ok := t.recs[k]; ok {
			line, _ := json.Marshal(r)
			b = append(append(b, line...), '\n')
		} else {
			b = append(append(b, t.schema.goneLine(k)...), '\n')
		}
	}
	return b
}

// journalPendingLocked appends the records of the pending keys to the
// journal, in one write. On an error they stay pending.
func (t *Table[R]) journalPendingLocked() error {
	if len(t.pending) == 0 {
		return nil
	}
	if err := t.writeJournalLocked(t.pendingLinesLocked()); err != nil {
		t.touch() // retried with the next compaction
		return err
	}
	clear(t.pending)
	t.touch()
	return nil
}

// Delete drops the record of key.
func (t *Table[R]) Delete(key string) { t.DeleteIf(key, nil) }

// DeleteIf drops the record of key if there is one and cond (nil: any)
// holds for it, in one step: no Set can come between the check and the
// delete.
func (t *Table[R]) DeleteIf(key string, cond func(R) bool) {
	t.mu.Lock()
	r, ok := t.recs[key]
	del := cond == nil || ok && cond(r)
	if del {
		delete(t.recs, key)
		delete(t.pending, key)
		if t.writeJournalLocked(append(t.schema.goneLine(key), '\n')) != nil {
			t.pending[key] = struct{}{} // its gone line, once the journal can take it
		}
	}
	t.mu.Unlock()
	if del {
		t.touch()
	}
}

// Get returns the record of key.
func (t *Table[R]) Get(key string) (R, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.recs[key]
	return r, ok
}

// Records returns every record, sorted by key.
func (t *Table[R]) Records() []R {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sortedByKey(t.recs, t.schema.Key)
}

// Close writes the last state and stops the writer. It is idempotent.
func (t *Table[R]) Close() error {
	var err error
	t.once.Do(func() {
		close(t.closing)
		<-t.done
		t.mu.Lock()
		defer t.mu.Unlock()
		jerr := t.journalPendingLocked()
		if err = t.compactLocked(); err != nil {
			err = errors.Join(jerr, err)
		}
		if t.journal != nil {
			t.journal.Close()
			t.journal = nil
		}
	})
	return err
}

// Discard stops the writer and removes the files: what they held no longer
// holds (a clean stop of the daemon, after which the next one starts
// afresh). It is the end of the Table, like Close.
func (t *Table[R]) Discard() error {
	var err error
	t.once.Do(func() {
		close(t.closing)
		<-t.done
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.journal != nil {
			t.journal.Close()
			t.journal = nil
		}
		err = errors.Join(t.dir.Remove(t.name), t.dir.Remove(journalOf(t.name)))
	})
	return err
}

func (t *Table[R]) touch() {
	select {
	case t.dirty <- struct{}{}:
	default:
	}
}

// writer journals what Put leaves (at once) and compacts the journal into
// NAME at most once a second while changes come in.
func (t *Table[R]) writer() {
	defer close(t.done)
	var compact <-chan time.Time // armed while a change waits to be compacted
	for {
		select {
		case <-t.put:
			_ = t.Write() // what it could not write stays pending, retried below
		case <-t.dirty:
			if compact == nil {
				compact = time.After(compactEvery)
			}
		case <-compact:
			compact = nil
			t.mu.Lock()
			_ = t.journalPendingLocked() // the old journal must lead to them if the compaction fails
			err := t.compactLocked()     // NAME's failure is reported by WriteFileAtomic
			t.mu.Unlock()
			if err != nil { // a full disk: tried again every compactEvery until it takes
				compact = time.After(compactEvery)
			}
		case <-t.closing:
			return
		}
	}
}

// compactLocked writes every record to NAME, then replaces the journal
// with a snapshot of them. A crash between the two leaves the old journal,
// which leads to the same records.
func (t *Table[R]) compactLocked() error {
	list := sortedByKey(t.recs, t.schema.Key)
	// Each record marshalled once, for both files: at 10,000 keys the
	// encoding is most of the cost.
	var file, snap bytes.Buffer
	file.WriteString("[")
	n := 0
	for _, r := range list {
		line, err := json.Marshal(r)
		if err != nil {
			continue
		}
		if n++; n > 1 {
			file.WriteString(",")
		}
		file.WriteString("\n")
		file.Write(line)
		snap.Write(line)
		snap.WriteByte('\n')
	}
	file.WriteString("\n]\n")
	if err := t.dir.WriteFileAtomic(t.name, file.Bytes(), 0o600, t.schema.Durable); err != nil {
		return err
	}
	journal := journalOf(t.name)
	tmp := "." + journal + ".tmp"
	_ = t.dir.Remove(tmp)
	j, err := t.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err == nil {
		var n int
		if n, err = j.Write(snap.Bytes()); err == nil && n < snap.Len() {
			err = io.ErrShortWrite
		}
		if err == nil && t.schema.Durable {
			err = j.Sync() // the old journal, flushed, stays until this one is
		}
		if err == nil {
			err = t.dir.Rename(tmp, journal)
		}
		if err != nil {
			j.Close()
			_ = t.dir.Remove(tmp)
		}
	}
	if err != nil {
		// Keep appending to the old journal: it still leads to the
		// records, with NAME or without it.
		return err
	}
	if t.journal != nil {
		t.journal.Close()
	}
	t.journal, t.jsize = j, int64(snap.Len())
	clear(t.pending) // the snapshot holds every record, and no deleted one
	t.err = nil      // (WriteFileAtomic told the health)
	return nil
}
