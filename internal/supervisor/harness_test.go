package supervisor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// The tests here run real children, so this test process owns wait4: one
// reaper for the whole binary, and nothing else in the package may wait.
var (
	testReaper     *reaper.Reaper
	testReaperOnce sync.Once
)

// harness is a Manager with an in-memory event log and snapshot store.
type harness struct {
	t       *testing.T
	mgr     *Manager
	capture *spawn.Capture

	mu      sync.Mutex // guards events, snaps and reports
	events  []program.Event
	snaps   map[string]program.Snapshot
	reports []program.Snapshot // every snapshot, in order
	seq     uint64
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with the Deps changed by setup first.
func newHarnessWith(t *testing.T, setup func(*Deps)) *harness {
	testReaperOnce.Do(func() {
		// As the daemon does first thing: a forker thread started later, by
		// the first fork, would copy a descriptor table that already holds
		// that fork's own exec-shim socket (and keep the shim's report from
		// ever ending).
		spawn.StartForker()
		testReaper = reaper.New()
		if err := testReaper.Start(false); err != nil {
			t.Fatal(err)
		}
	})
	h := &harness{t: t, snaps: map[string]program.Snapshot{}}
	root, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs, err := root.Sub("logs")
	if err != nil {
		t.Fatal(err)
	}
	h.capture = spawn.NewCapture(spawn.CaptureOptions{Logs: logs})
	t.Cleanup(func() { // after the shutdown below: cleanups run last first
		h.capture.Close()
		logs.Close()
		root.Close()
	})
	deps := Deps{
		Reaper: testReaper, Publish: h.publish, Update: h.update,
		Rand: rand.Float64, Capture: h.capture,
	}
	tk := newTestKeeper(t, root)
	tk.changed = h.capture.Changed
	deps.Keeper = tk
	if setup != nil {
		setup(&deps)
	}
	h.mgr = NewManager(deps, func(id string) {
		h.mu.Lock()
		delete(h.snaps, id)
		h.mu.Unlock()
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.mgr.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return h
}

func (h *harness) publish(e program.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.Seq, e.TS = h.seq, time.Now()
	h.events = append(h.events, e)
}

func (h *harness) update(s program.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snaps[s.Status.ID] = s
	h.reports = append(h.reports, s)
}

// status returns the latest reported status of id.
func (h *harness) status(id string) program.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snaps[id].Status
}

// snapshot returns the latest snapshot of id.
func (h *harness) snapshot(id string) program.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snaps[id]
}

// output is what instance id has written so far, one line each.
func (h *harness) output(id string) string {
	var b strings.Builder
	cur, err := logfile.Read([]logfile.Source{{ID: id, Log: h.capture.Log(id)}}, logfile.Query{Tail: -1}, func(e *logfile.Entry) error {
		b.Write(e.Line)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	cur.Close()
	return b.String()
}

// matching returns the events of kind for id ("" = any id), in order.
func (h *harness) matching(kind, id string) []program.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []program.Event
	for _, e := range h.events {
		if e.Kind == kind && (id == "" || e.ID == id) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits for cond as testutil.Eventually does; a timeout shows
// every event the harness saw.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testutil.Eventually(h.t, what, cond, testutil.Explain(h.dump))
}

func (h *harness) dump() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, e := range h.events {
		j, _ := e.MarshalJSON()
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// spec is a program at documented defaults (docs/config.md) with test-sized timings.
func spec(name string, argv ...string) program.Spec {
	return program.Spec{
		Name: name, Command: argv, Cwd: os.TempDir(), Instances: 1, Restart: program.RestartAlways,
		Autostart: true, Ready: program.ReadySpawn, StopSignal: syscall.SIGTERM, StopGrace: 5 * time.Second,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, BackoffJitter: 0.1,
		CleanExitCodes: []int{0}, StableRunReset: 5 * time.Minute, MaxCrashes: 1000,
		CleanRestartBudget: 1000, CleanRestartWindow: time.Minute, CleanRestartBackoff: time.Second,
		RSSExitCode: 12, RSSBackoff: 30 * time.Second, RSSLoopBudget: 3, RSSLoopWindow: 10 * time.Minute,
		WedgeChecks: 1, WedgeRestartGrace: 10 * time.Second, WedgeLoopBudget: 3, WedgeLoopWindow: 30 * time.Minute,
		TurnIdleAfter: 10 * time.Second, StartTimeout: 30 * time.Second,
		Logs: program.Logs{MaxSize: 1 << 20, MaxFiles: 2},
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool { return testutil.Alive(pid) }

// groupMembers lists live processes whose process group is pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func pidOf(s program.Status) int {
	if s.PID == nil {
		return 0
	}
	return *s.PID
}

func data[T any](e program.Event) *T {
	d, ok := e.Data.(*T)
	if !ok {
		panic(fmt.Sprintf("event %s has %T", e.Kind, e.Data))
	}
	return d
}
