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
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
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
