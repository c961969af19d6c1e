package events

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// gaps returns the degraded_storage events of evs that name lost seqs.
func gaps(evs []program.Event) []*program.DaemonPhase {
	var out []*program.DaemonPhase
	for _, e := range evs {
		if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseDegradedStorage && d.LostFrom > 0 {
			out = append(out, d)
		}
	}
	return out
}

// TestTheAuditLogMarksWhatItLost: events published while the disk is full
// go out live; once an append succeeds again one event names their seqs,
// and none of them is in the log.
func TestTheAuditLogMarksWhatItLost(t *testing.T) {
	disk := testutil.SmallDisk(t, "64k")
	dir := filepath.Join(disk, "audit")
	l := openLog(t, Options{Dir: dir})
	l.Publish(spawned(1))
	filler := testutil.Fill(t, disk)
	var lost []uint64
	for i := 0; l.WriteErrors() == 0 || len(lost) < 5; i++ {
		if i > 10000 {
			t.Fatal("10000 events written on a full disk")
		}
		e := l.Publish(spawned(100 + i))
		if l.WriteErrors() > 0 {
			lost = append(lost, e.Seq)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	next := l.Publish(spawned(2))
	evs, err := l.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := gaps(evs)
	if len(g) != 1 || g[0].LostFrom > lost[0] || g[0].LostTo != lost[len(lost)-1] || g[0].LostTo >= next.Seq {
		t.Fatalf("lost %v, then seq %d; gaps %+v in\n%v", lost, next.Seq, g, evs)
	}
	for _, e := range evs {
		if g[0].LostFrom <= e.Seq && e.Seq <= g[0].LostTo {
			t.Errorf("seq %d is in the log and in the gap", e.Seq)
		}
	}
	if last := evs[len(evs)-1]; last.Seq != next.Seq+1 {
		t.Errorf("the gap event is seq %d, want the one after %d", last.Seq, next.Seq)
	}
}

// TestSeqIsNeverReusedAcrossAKill: a log abandoned (its daemon killed)
// while its events were being lost leaves a reservation; the next one
// resumes past it and marks the range, so no seq handed out live is
// handed out again.
func TestSeqIsNeverReusedAcrossAKill(t *testing.T) {
	disk := testutil.SmallDisk(t, "64k")
	dir := filepath.Join(disk, "audit")
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l.Publish(spawned(1))
	filler := testutil.Fill(t, disk)
	var last uint64
	for i := 0; l.WriteErrors() < 3; i++ {
		if i > 10000 {
			t.Fatal("10000 events written on a full disk")
		}
		last = l.Publish(spawned(100 + i)).Seq
	}
	// Killed: no Close, nothing more written. (Its descriptors are
	// closed so the next Open is alone, as after a real kill.)
	l.mu.Lock()
	l.f.Close()
	l.seqf.Close()
	l.f, l.seqf, l.closed = nil, nil, true
	l.mu.Unlock()
	close(l.stop)
	<-l.pruned
	l.dir.Close()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	l2 := openLog(t, Options{Dir: dir})
	if l2.LastSeq() < last {
		t.Fatalf("the next log resumes at %d, below seq %d handed out live", l2.LastSeq(), last)
	}
	first := l2.Publish(spawned(2))
	evs, err := l2.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := gaps(evs)
	if len(g) != 1 || g[0].LostFrom > last || g[0].LostTo < last || g[0].LostTo >= first.Seq {
		t.Fatalf("last seq %d before the kill, first after %d; gaps %+v", last, first.Seq, g)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Errorf("seq %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
	// Clean again: the log after it continues without a jump.
	l2.Close()
	l3 := openLog(t, Options{Dir: dir})
	if got, want := l3.LastSeq(), evs[len(evs)-1].Seq; got != want {
		t.Errorf("a clean reopen resumes at %d, want %d", got, want)
	}
}

// TestAKilledLogsHolesAreEachMarked: a daemon killed while a lost event
// in the middle of the log (a long line that did not fit where shorter
// ones after it did) was not yet marked: the next log marks exactly that
// hole and the tail of the reservation, never a seq the log holds.
func TestAKilledLogsHolesAreEachMarked(t *testing.T) {
	dir := t.TempDir()
	day := time.Now().UTC().Format(dayLayout)
	var lines string
	for _, seq := range []uint64{1, 2, 4, 5} {
		lines += `{"seq":` + itoa(seq) + `,"ts":"` + day + `T00:00:01.000Z","kind":"daemon","phase":"started"}` + "\n"
	}
	writeFile(t, filepath.Join(dir, fileName(day)), lines)
	writeFile(t, filepath.Join(dir, seqName), string(seqLine(20, true, 3)))
	l := openLog(t, Options{Dir: dir})
	if l.LastSeq() != 19 {
		t.Fatalf("resumes at %d, want after the reservation's 19", l.LastSeq())
	}
	l.Publish(spawned(1))
	evs, err := l.Since(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range gaps(evs) {
		got = append(got, fmt.Sprintf("%d-%d", d.LostFrom, d.LostTo))
	}
	if fmt.Sprint(got) != "[3-3 6-19]" {
		t.Errorf("gaps %v, want [3-3 6-19]", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, seqName))
	if string(b) != string(seqLine(20, false, 0)) {
		t.Errorf("the reservation after the gaps are marked: %q", b)
	}
}
