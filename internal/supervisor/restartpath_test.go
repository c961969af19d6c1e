package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
)

// countEnv names the file readyOrMute counts its runs in.
const countEnv = "TEND_RUN_COUNT"

// readyOrMute is a fake child whose even runs (counted in $TEND_RUN_COUNT)
// say READY=1 and exit at once, so that the message may still wait unread
// in the socket as the run ends, and whose odd runs say nothing and exit
// after a while. Each prints its notify socket's inode.
func readyOrMute() {
	f := os.Getenv(countEnv)
	b, _ := os.ReadFile(f)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := os.WriteFile(f, []byte(strconv.Itoa(n+1)), 0o600); err != nil {
		os.Exit(3)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(os.Getenv("NOTIFY_SOCKET"), &st); err != nil {
		fmt.Println("no socket:", err)
		os.Exit(3)
	}
	if n%2 == 0 {
		fmt.Printf("ready run %d socket %d\n", n, st.Ino)
		sdNotify(fmt.Sprintf("READY=1\nSTATUS=run %d", n))
		os.Exit(1)
	}
	fmt.Printf("mute run %d socket %d\n", n, st.Ino)
	time.Sleep(200 * time.Millisecond)
	os.Exit(1)
}

// recorder keeps the Record calls of a harness.
type recorder struct {
	mu   sync.Mutex // guards pids
	pids []int
}

func (r *recorder) record(_ string, pid, _ int, _ time.Time) {
	r.mu.Lock()
	r.pids = append(r.pids, pid)
	r.mu.Unlock()
}

func (r *recorder) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pids)
}

// A restart that follows an exit at once keeps the notify socket (no new
// socket between the exit and the fork) and runs.json's record (the next
// run's replaces it); what the ended run sent never reaches the next one,
// however late it is read; and the socket goes, and the record with it,
// once the instance stops.
func TestImmediateRestartKeepsSocketAndRecord(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	h := newHarnessWith(t, func(d *Deps) { d.Record = rec.record })
	h.mgr.deps.NotifyDir = t.TempDir()
	s := fakeSpec("quick", "ready-or-mute")
	s.Env[countEnv] = filepath.Join(t.TempDir(), "count")
	s.Ready = program.ReadyNotify
	s.BackoffInitial, s.BackoffMax = 0, 0
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	const runs = 21
	h.waitFor("21 runs", func() bool { return len(h.matching(program.KindSpawned, "quick:0")) >= runs })
	if _, err := h.mgr.Stop(context.Background(), "quick", program.ActOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}

	mute := map[int]bool{} // pids of the runs that said nothing
	for _, e := range h.matching(program.KindSpawned, "quick:0") {
		if sp := data[program.Spawned](e); sp.Run%2 == 0 {
			mute[sp.PID] = true
		}
	}
	h.mu.Lock()
	for _, r := range h.reports {
		if st := r.Status; st.PID != nil && mute[*st.PID] && (st.Ready || st.StatusText != "") {
			t.Errorf("a mute run is ready with status %q: the ended run's READY=1 reached it", st.StatusText)
		}
	}
	h.mu.Unlock()
	inodes := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(h.output("quick:0")), "\n") {
		if _, ino, ok := strings.Cut(line, " socket "); ok {
			inodes[ino] = true
		}
	}
	if len(inodes) != 1 {
		t.Errorf("the runs had %d notify sockets, want one kept throughout:\n%s", len(inodes), h.output("quick:0"))
	}
	if _, err := os.Lstat(filepath.Join(h.mgr.deps.NotifyDir, "quick-0.sock")); !os.IsNotExist(err) {
		t.Errorf("the stopped instance's socket is still there: %v", err)
	}
	pids := rec.calls()
	if len(pids) < runs+1 || pids[len(pids)-1] != 0 {
		t.Fatalf("record calls %v: want one per run, then 0 for the stop", pids)
	}
	if i := slices.Index(pids, 0); i != len(pids)-1 {
		t.Errorf("record calls %v: a run's end recorded no run at %d, though the next came at once", pids, i)
	}
}

// A restart that waits out a backoff lets go of the socket and of the
// record meanwhile: an instance that is not running holds no descriptor.
func TestBackoffLetsGoOfSocketAndRecord(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	h := newHarnessWith(t, func(d *Deps) { d.Record = rec.record })
	h.mgr.deps.NotifyDir = t.TempDir()
	s := spec("slow", "/bin/sh", "-c", "exit 1")
	s.BackoffInitial, s.BackoffMax = time.Hour, time.Hour
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the backoff", func() bool { return h.status("slow:0").State == program.StateBackoff })
	if _, err := os.Lstat(filepath.Join(h.mgr.deps.NotifyDir, "slow-0.sock")); !os.IsNotExist(err) {
		t.Errorf("the socket of an instance in backoff is still there: %v", err)
	}
	if pids := rec.calls(); len(pids) != 2 || pids[0] == 0 || pids[1] != 0 {
		t.Errorf("record calls %v: want the run, then none", pids)
	}
}

// kinds lists the kinds of the events e, in order.
func kinds(es []program.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// The events of an end that a restart follows at once are published while
// the next run's fork is under way, in their order and before the next
// run's spawned; every exited event is one detection observed.
func TestImmediateRestartEventsInOrder(t *testing.T) {
	t.Parallel()
	var detected atomic.Int64
	h := newHarnessWith(t, func(d *Deps) { d.Detected = func(time.Duration) { detected.Add(1) } })
	s := spec("loop", "/bin/sh", "-c", "exit 3")
	s.BackoffInitial, s.BackoffMax, s.MaxCrashes, s.HardMaxCrashes = 0, 0, 3, 5
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("gave_up", func() bool { return len(h.matching(program.KindGaveUp, "loop:0")) == 1 })
	var got []program.Event
	h.mu.Lock()
	for _, e := range h.events {
		if e.ID == "loop:0" && e.Kind != program.KindStatusChanged {
			got = append(got, e)
		}
	}
	h.mu.Unlock()
	var want []string
	for i := range 5 {
		want = append(want, program.KindSpawned, program.KindExited)
		switch i {
		case 2: // the third crash reaches max_crashes
			want = append(want, program.KindHealthWarn, program.KindBackoff)
		case 4: // the fifth, hard_max_crashes
			want = append(want, program.KindGaveUp)
		default:
			want = append(want, program.KindBackoff)
		}
	}
	if k := kinds(got); !slices.Equal(k, want) {
		t.Fatalf("events %v, want %v", k, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("events out of sequence: %v", got)
		}
	}
	for i := 0; i+1 < len(got); i++ { // each exited names the run spawned before it
		if got[i].Kind == program.KindSpawned && data[program.Exited](got[i+1]).PID != data[program.Spawned](got[i]).PID {
			t.Errorf("exited %d follows spawned %d", data[program.Exited](got[i+1]).PID, data[program.Spawned](got[i]).PID)
		}
	}
	if n := detected.Load(); n != 5 {
		t.Errorf("%d detections observed, want one per exit (5)", n)
	}
}

// A command that comes between an end and the restart that was to follow
// at once is taken first: the end's events are published before it is
// handled, and a stop leaves nothing started.
func TestStopBeforeTheRestartPublishesTheEnd(t *testing.T) {
	var mu sync.Mutex
	var events []program.Event
	s := spec("held", "/bin/true")
	s.BackoffInitial, s.BackoffMax = 0, 0
	updates := make(chan program.Snapshot, 16)
	in := newInstance(&s, "", 0, Deps{
		Publish: func(e program.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
		Update: func(sn program.Snapshot) { updates <- sn },
	})
	// As the loop would, before letting go: a run ends, and its restart is due.
	now := time.Now()
	in.ended(program.Exit{PID: 1 << 22, Code: 1, StartedAt: now.Add(-time.Second), EndedAt: now}, restart.IntentNone)
	if !in.spawnDue || len(in.later) != 2 {
		t.Fatalf("spawnDue %v, %d events held; want a restart due and exited, backoff held", in.spawnDue, len(in.later))
	}
	mu.Lock()
	if len(events) != 0 {
		t.Fatalf("published before the restart's fork: %v", kinds(events))
	}
	mu.Unlock()
	reply := make(chan bool, 1)
	in.putCmd(command{kind: cmdStop, opts: program.ActOptions{Wait: true}, reply: reply})
	in.takeMail() // taken before the loop's next turn, which takes commands first
	in.letGo()
	select {
	case ok := <-reply:
		if !ok {
			t.Fatal("stop not answered true")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stop never answered")
	}
	mu.Lock()
	got := kinds(events)
	mu.Unlock()
	if !slices.Equal(got, []string{program.KindExited, program.KindBackoff}) {
		t.Errorf("events %v, want exited, backoff and nothing spawned", got)
	}
	var last program.Snapshot
	for len(updates) > 0 {
		last = <-updates
	}
	if last.Status.State != program.StateStopped {
		t.Errorf("state %s, want stopped", last.Status.State)
	}
}
