package events

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// What the audit log does when it cannot be written (a full disk,
// docs/daemon.md#when-the-disk-fills): a write that fails or falls short
// is cut back, the events lost are remembered as a range and named by a
// gap event once an append succeeds again, and their seqs are never
// handed out again.
//
// seq is never reused (docs/events.md#seq-is-never-reused), across a SIGKILL too. While
// every event reaches the audit log, the log itself says the last seq
// handed out. When an append fails (a full disk), events still go out
// live with their seqs, and a daemon killed then would hand those seqs
// out again: so, as databases hand out sequence numbers, the log keeps a
// reservation, the file seq.next in the audit directory:
//
//	NNNNNNNNNNNNNNNNNNNN D
//
// N: no seq at or past N was handed out; D: 1 while some seq below N may
// be missing from the audit log. The file has a fixed size and is written
// in place (pwrite at offset 0), which needs no new block: it can still
// be written when the disk is full (on file systems that overwrite in
// place, which tmpfs, ext4 and xfs do; not btrfs or zfs). At the first
// failed append it is set to N = the next seq + seqBlock, D = 1, and
// moved on by seqBlock whenever the seqs reach N; once the gap event is
// in the log (the degraded_storage event naming the lost range), D is 0
// again. Open resumes after the audit's last seq, or after N-1 when D is
// 1, and then marks the range in between as lost.

// seqName is the reservation's file in the audit directory.
const seqName = "seq.next"

// seqBlock is how far ahead the reservation runs while events are lost.
const seqBlock = 4096

// seqLine is the file's content for n and dirty, always the same size.
func seqLine(n uint64, dirty bool) []byte {
	d := 0
	if dirty {
		d = 1
	}
	return fmt.Appendf(nil, "%020d %d\n", n, d)
}

// openSeqFile opens (making it if missing) the reservation and reads it.
// A file that does not parse is as if clean: the audit log says the rest.
func (l *Log) openSeqFile() (n uint64, dirty bool, err error) {
	f, err := l.dir.OpenFile(seqName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, false, err
	}
	b := make([]byte, 64)
	k, _ := f.ReadAt(b, 0) // a short file is read as it is
	var d int
	if _, perr := fmt.Sscanf(strings.TrimSpace(string(b[:k])), "%d %d", &n, &d); perr != nil {
		n, d = 0, 0
	}
	l.seqf = f
	if k != len(seqLine(0, false)) {
		// Sized once, while the disk (likely) has room: later writes
		// are in place.
		if _, err := f.WriteAt(seqLine(n, d == 1), 0); err != nil {
			return n, d == 1, err
		}
	}
	return n, d == 1, nil
}

// reserveLocked keeps the reservation ahead of seq while events are lost
// (or dirty is being set); it writes the file in place.
func (l *Log) reserveLocked(seq uint64) {
	if l.seqf == nil {
		return
	}
	if l.seqDirty && seq < l.reserved {
		return
	}
	l.reserved = max(l.reserved, seq+seqBlock)
	l.seqDirty = true
	if _, err := l.seqf.WriteAt(seqLine(l.reserved, true), 0); err != nil {
		l.seqDirty = false // tried again with the next lost event
		l.health().Failed(l.dir.Rel(seqName), err)
	}
}

// cleanLocked marks the reservation clean: the audit log holds every seq
// handed out, or the gap event naming those it lacks.
func (l *Log) cleanLocked() {
	if l.seqf == nil || !l.seqDirty {
		return
	}
	if _, err := l.seqf.WriteAt(seqLine(l.reserved, false), 0); err == nil {
		l.seqDirty = false
	}
}

// gapLocked appends the event that marks the lost range, once an append
// succeeds again; true if it is in the log. It is delivered live like any
// event.
func (l *Log) gapLocked() bool {
	e := program.Event{Seq: l.seq + 1, TS: l.now().UTC().Truncate(time.Millisecond), Kind: program.KindDaemon, Data: &program.DaemonPhase{
		Phase: program.PhaseDegradedStorage, LostFrom: l.lostFrom, LostTo: l.lostTo, File: l.healthName(), Error: l.lostWhy,
	}}
	line, err := e.MarshalJSON()
	if err != nil {
		return false
	}
	if l.f == nil || !l.writeLineLocked(append(line, '\n')) {
		return false
	}
	l.seq = e.Seq
	e.JSON = line[:len(line):len(line)]
	l.published.Add(1)
	for _, s := range l.subs {
		s.deliverLocked(e)
	}
	l.lostFrom, l.lostTo, l.lostWhy = 0, 0, ""
	l.cleanLocked()
	return true
}

// healthName is the audit log's name in the state directory's health.
func (l *Log) healthName() string {
	if n := strings.TrimSuffix(l.dir.Rel(""), "/"); n != "" {
		return n
	}
	return "audit"
}

// writeLineLocked appends line to the current file in one write; false
// if it is not there whole. A write that fails or falls short is cut
// back, so that no torn line stays between whole ones; if even that
// fails, the handle is dropped and the next append reopens the file and
// starts a fresh line.
func (l *Log) writeLineLocked(line []byte) bool {
	n, err := l.f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 && l.f.Truncate(l.size) != nil {
			l.f.Close()
			l.f = nil
		}
		l.writeFailedLocked(err)
		return false
	}
	l.size += int64(n)
	if l.writeFailing {
		l.writeFailing = false
		l.health().Wrote(l.healthName())
	}
	return true
}

// lostLocked notes that the event seq is not in the audit log: the gap
// event names it once an append succeeds, and the reservation keeps its
// seq from being handed out again after a kill.
func (l *Log) lostLocked(seq uint64) {
	if l.lostFrom == 0 {
		l.lostFrom = seq
	}
	l.lostTo = seq
	if l.err != nil {
		l.lostWhy = l.err.Error()
	}
	l.reserveLocked(seq + 1)
}

// health is the state directory's health, which the log reports to.
func (l *Log) health() *statedir.Health { return l.dir.Health() }
