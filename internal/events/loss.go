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
// is cut back, the seqs of the events lost are kept as ranges, each named
// by a gap event (degraded_storage, lost_from to lost_to) once an append
// succeeds again, and those seqs are never handed out again.
//
// seq is never reused (docs/events.md#seq-is-never-reused), across a
// SIGKILL too. While every event reaches the audit log, the log itself
// says the last seq handed out. When an append fails, events still go out
// live with their seqs, and a daemon killed then would hand those seqs
// out again: so, as databases hand out sequence numbers, the log keeps a
// reservation, the file seq.next in the audit directory:
//
//	NNNNNNNNNNNNNNNNNNNN D FFFFFFFFFFFFFFFFFFFF
//
// N: no seq at or past N was handed out; D: 1 while some seq below N may
// be missing from the audit log with no gap event naming it; F: the first
// such seq. The file has a fixed size and is written in place (pwrite at
// offset 0), which needs no new block: it can still be written when the
// disk is full (on file systems that overwrite in place, which tmpfs,
// ext4 and xfs do; not btrfs or zfs). At the first failed append it is set
// to N = the next seq + seqBlock, D = 1, and moved on by seqBlock whenever
// the seqs reach N; once every gap event is in the log, D is 0 again.
// Open resumes after the audit's last seq, or, when D is 1, after N-1,
// and marks every seq from F to N-1 that the audit log lacks.

// seqName is the reservation's file in the audit directory.
const seqName = "seq.next"

// seqBlock is how far ahead the reservation runs while events are lost.
const seqBlock = 4096

// seqRange is a range of seqs, both ends included.
type seqRange struct{ from, to uint64 }

// seqLine is the file's content, always the same size.
func seqLine(n uint64, dirty bool, first uint64) []byte {
	d := 0
	if dirty {
		d = 1
	}
	return fmt.Appendf(nil, "%020d %d %020d\n", n, d, first)
}

// openSeqFile opens (making it if missing) the reservation and reads it.
// A file that does not parse is as if clean: the audit log says the rest.
func (l *Log) openSeqFile() (n uint64, dirty bool, first uint64, err error) {
	f, err := l.dir.OpenFile(seqName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, false, 0, err
	}
	b := make([]byte, 80)
	k, _ := f.ReadAt(b, 0) // a short file is read as it is
	var d int
	if _, perr := fmt.Sscanf(strings.TrimSpace(string(b[:k])), "%d %d %d", &n, &d, &first); perr != nil {
		n, d, first = 0, 0, 0
	}
	l.seqf = f
	if k != len(seqLine(0, false, 0)) {
		// Sized once, while the disk (likely) has room: later writes
		// are in place.
		if _, err := f.WriteAt(seqLine(n, d == 1, first), 0); err != nil {
			return n, d == 1, first, err
		}
	}
	return n, d == 1, first, nil
}

// resumeLocked is Open's part after a daemon that died with events not
// marked lost (the reservation dirty, its block ending at n, the first
// unmarked seq first): seq continues after the block, and every seq from
// first to n-1 the audit log lacks is a lost range to mark.
func (l *Log) resumeLocked(n, first uint64) error {
	end := max(n-1, l.seq)
	if first == 0 || first > l.seq+1 {
		first = l.seq + 1 // an older file, or nothing lost before the tail
	}
	next := first
	err := scan(l.dir, first-1, func(e program.Event) bool {
		if e.Seq > next {
			l.lost = append(l.lost, seqRange{next, e.Seq - 1})
		}
		next = e.Seq + 1
		return true
	})
	if err != nil {
		return err
	}
	if next <= end {
		l.lost = append(l.lost, seqRange{next, end})
	}
	l.seq = end
	l.lostWhy = "the daemon stopped before the audit log could mark these events lost"
	if len(l.lost) == 0 {
		l.cleanLocked()
	}
	return nil
}

// cleanLocked marks the reservation clean: every seq handed out is in
// the audit log, or named by a gap event there.
func (l *Log) cleanLocked() {
	if l.seqf != nil && l.seqDirty {
		if _, err := l.seqf.WriteAt(seqLine(l.reserved, false, 0), 0); err == nil {
			l.seqDirty, l.seqFirst = false, 0
		}
	}
}

// reserveLocked keeps the reservation ahead of seq while events are lost,
// and its first unmarked seq current; it writes the file in place.
func (l *Log) reserveLocked(seq uint64) {
	if l.seqf == nil {
		return
	}
	first := l.lost[0].from
	if l.seqDirty && seq < l.reserved && first == l.seqFirst {
		return
	}
	l.reserved = max(l.reserved, seq+seqBlock)
	if _, err := l.seqf.WriteAt(seqLine(l.reserved, true, first), 0); err != nil {
		l.seqDirty = false // tried again with the next lost event
		l.health().Failed(l.dir.Rel(seqName), err)
		return
	}
	l.seqDirty, l.seqFirst = true, first
}

// gapsLocked appends the events that mark the lost ranges, once an
// append succeeds again, oldest first, as long as they go in. Each is
// delivered live like any event. Once none is left the reservation is
// clean again.
func (l *Log) gapsLocked() {
	for len(l.lost) > 0 {
		r := l.lost[0]
		e := program.Event{Seq: l.seq + 1, TS: l.now().UTC().Truncate(time.Millisecond), Kind: program.KindDaemon, Data: &program.DaemonPhase{
			Phase: program.PhaseDegradedStorage, LostFrom: r.from, LostTo: r.to, File: l.healthName(), Error: l.lostWhy,
		}}
		line, err := e.MarshalJSON()
		if err != nil || l.f == nil || !l.writeLineLocked(append(line, '\n')) {
			return // its seq was not handed out: the next gap event takes it
		}
		l.seq = e.Seq
		e.JSON = line[:len(line):len(line)]
		l.published.Add(1)
		for _, s := range l.subs {
			s.deliverLocked(e)
		}
		l.lost = l.lost[1:]
	}
	l.lost, l.lostWhy = nil, ""
	l.cleanLocked()
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

// lostLocked notes that the event seq is not in the audit log: a gap
// event names it once an append succeeds, and the reservation keeps its
// seq from being handed out again after a kill.
func (l *Log) lostLocked(seq uint64) {
	if n := len(l.lost); n > 0 && l.lost[n-1].to+1 == seq {
		l.lost[n-1].to = seq
	} else {
		l.lost = append(l.lost, seqRange{seq, seq})
	}
	if l.err != nil {
		l.lostWhy = l.err.Error()
	}
	l.reserveLocked(seq + 1)
}

// health is the state directory's health, which the log reports to.
func (l *Log) health() *statedir.Health { return l.dir.Health() }
