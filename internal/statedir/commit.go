package statedir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
)

// Writing a Table's journal when the disk may be full
// (docs/daemon.md#when-the-disk-fills): every write is checked, a failed
// or short one is cut back so the journal never holds half a record, and
// what it held stays pending, written again with the next write that
// succeeds or the next compaction. Decisions go through Commit: written
// and flushed (fsync) before the caller acts on them, or refused.

// Commit records rs durably, as one decision: their lines (after what Put
// left pending) are appended to the journal in one write and flushed to
// disk (fsync) before Commit returns nil. On an error nothing of rs is
// recorded, in the journal or in memory: the caller must not act on the
// decision. Concurrent Commits share writes and flushes (a group commit,
// as databases do): ten thousand instances stopped at once cost a few
// fsyncs, not ten thousand.
func (t *Table[R]) Commit(rs ...R) error {
	req := &commitReq[R]{recs: rs, done: make(chan error, 1)}
	t.cmu.Lock()
	t.queue = append(t.queue, req)
	if t.leading {
		t.cmu.Unlock()
		return <-req.done
	}
	t.leading = true
	for len(t.queue) > 0 {
		batch := t.queue
		t.queue = nil
		t.cmu.Unlock()
		err := t.commitBatch(batch)
		for _, q := range batch {
			q.done <- err
		}
		t.cmu.Lock()
	}
	t.leading = false
	t.cmu.Unlock()
	return <-req.done
}

// fsyncs counts the flushes of Commit batches, for the tests and the
// measurements of docs/daemon.md#when-the-disk-fills.
var fsyncs atomic.Uint64

// commitReq is one caller's Commit, waiting for its batch.
type commitReq[R any] struct {
	recs []R
	done chan error // capacity 1
}

// commitBatch writes and flushes the records of a batch of Commits.
func (t *Table[R]) commitBatch(batch []*commitReq[R]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.pendingLinesLocked()
	for _, q := range batch {
		for _, r := range q.recs {
			line, _ := json.Marshal(r)
			b = append(append(b, line...), '\n')
		}
	}
	start := t.jsize
	if err := t.writeJournalLocked(b); err != nil {
		return err
	}
	fsyncs.Add(1)
	if err := t.journal.Sync(); err != nil {
		// Not on disk for sure: undo the lines, so that no later daemon
		// acts on a decision this one refused.
		t.cutJournalLocked(start)
		t.failedLocked(err)
		return fmt.Errorf("%s: fsync: %w", t.dir.Join(journalOf(t.name)), err)
	}
	clear(t.pending)
	for _, q := range batch {
		for _, r := range q.recs {
			t.recs[t.schema.Key(r)] = r
		}
	}
	t.touch()
	return nil
}

// writeJournalLocked appends b (whole lines) to the journal in one
// write. It never leaves part of a line behind: a write that fails or
// falls short is cut back (ftruncate, which a full disk allows), and if
// even that fails the journal is closed, to be reopened (and its torn
// tail cut) by the next write or replaced by the next compaction.
func (t *Table[R]) writeJournalLocked(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if t.journal == nil {
		if err := t.openJournalLocked(); err != nil {
			t.failedLocked(err)
			return err
		}
	}
	n, err := t.journal.Write(b)
	if err == nil && n < len(b) {
		err = &fs.PathError{Op: "write", Path: t.dir.Join(journalOf(t.name)), Err: io.ErrShortWrite}
	}
	if err != nil {
		t.cutJournalLocked(t.jsize)
		t.failedLocked(err)
		return err
	}
	t.jsize += int64(n)
	if t.err != nil {
		t.err = nil
		t.dir.health.Wrote(t.dir.Rel(journalOf(t.name)))
	}
	return nil
}

// cutJournalLocked cuts the journal back to size, its last whole line;
// if it cannot, the journal is closed (writeJournalLocked).
func (t *Table[R]) cutJournalLocked(size int64) {
	if t.journal == nil {
		return
	}
	if err := t.journal.Truncate(size); err != nil {
		t.journal.Close()
		t.journal = nil
		return
	}
	t.jsize = size
}

// openJournalLocked opens the journal on disk to append to, cut after
// its last whole line (a write that failed may have left part of one).
func (t *Table[R]) openJournalLocked() error {
	f, err := t.dir.OpenFile(journalOf(t.name), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	size, err := wholeLines(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		f.Close()
		return err
	}
	t.journal, t.jsize = f, size
	return nil
}

// wholeLines is the size of f up to and with its last '\n' (0 if none).
func wholeLines(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	buf := make([]byte, 64<<10)
	for end > 0 {
		start := max(0, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// failedLocked reports a write error of the journal. (NAME's own, at a
// compaction, WriteFileAtomic reports: a journal that takes every change
// keeps every record, with NAME behind or without it.)
func (t *Table[R]) failedLocked(err error) {
	t.err = err
	t.dir.health.Failed(t.dir.Rel(journalOf(t.name)), err)
}

// Err returns the last write error of the table's files, or nil.
func (t *Table[R]) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
