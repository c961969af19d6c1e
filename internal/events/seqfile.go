package events

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// seq is never reused (docs/events.md#seq), across a SIGKILL too. While
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
