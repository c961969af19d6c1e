package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// The subreaper setting and wait4(-1) are process-wide, so the real tests run
// in a re-executed copy of this test binary (TestInChild*), where nothing else
// waits for children. TestReaper starts that copy and checks it passed.
const childEnv = "TEND_REAPER_TEST_CHILD"

func TestReaper(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInChild", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestInChild") {
		t.Fatalf("child tests failed: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- FAIL") || strings.Contains(string(out), "--- SKIP: TestInChild") {
		t.Fatalf("child tests:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

var (
	shared     *Reaper
	sharedOnce sync.Once
)

// inChild skips outside the re-executed child and returns its one Reaper.
func inChild(t *testing.T) *Reaper {
	t.Helper()
	if os.Getenv(childEnv) == "" {
		t.Skip("runs in a re-executed child; see TestReaper")
	}
	sharedOnce.Do(func() {
		shared = New()
		shared.tick = time.Hour // what an idle reaper notices, it notices through SIGCHLD
		if err := shared.Start(true); err != nil {
			t.Fatal(err)
		}
	})
	return shared
}

// forkExec returns a fork function for Spawn that runs argv in its own group.
func forkExec(argv ...string) func() (int, error) {
	return func() (int, error) {
		return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
			Env:   os.Environ(),
			Files: []uintptr{0, 1, 2},
			Sys:   &syscall.SysProcAttr{Setpgid: true},
		})
	}
}

// children lists this process's live or zombie children.
func children(t *testing.T) []int {
	t.Helper()
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
	}
	return pids
}

func TestInChildOrphansOfADoubleForkAreReapedAndCounted(t *testing.T) {
	r := inChild(t)
	before := r.Orphans()
	got := make(chan Status, 1)
	// The subshell forks sleep and exits at once: sleep is orphaned and,
	// with the subreaper bit, reparented to us. No group kill, so it lives.
	_, err := r.Spawn(forkExec("/bin/sh", "-c", "(sleep 0.3 &); exit 3"), func(s Status) { got <- s }, false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s.Wait.ExitStatus() != 3 {
			t.Errorf("owner got exit %d, want 3", s.Wait.ExitStatus())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("owner never got its exit")
	}
	testutil.Eventually(t, "the orphaned sleep to be reaped", func() bool { return r.Orphans() > before })
	testutil.Eventually(t, "no children left", func() bool { return len(children(t)) == 0 })
}

func TestInChildEachOwnerGetsOnlyItsOwnChildren(t *testing.T) {
	r := inChild(t)
	const owners, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, owners)
	for o := 0; o < owners; o++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan Status, each)
			mine := map[int]bool{}
			for i := 0; i < each; i++ {
				pid, err := r.Spawn(forkExec("/bin/sh", "-c", "exit "+strconv.Itoa(o)), func(s Status) { ch <- s }, true)
				if err != nil {
					errs <- err
					return
				}
				mine[pid] = true
			}
			for i := 0; i < each; i++ {
				select {
				case s := <-ch:
					if !mine[s.PID] || s.Wait.ExitStatus() != o {
						errs <- errors.New("owner " + strconv.Itoa(o) + " got a stranger's exit: pid " + strconv.Itoa(s.PID))
						return
					}
					delete(mine, s.PID)
				case <-time.After(20 * time.Second):
					errs <- errors.New("owner " + strconv.Itoa(o) + " is missing exits")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestInChildFailedExecDoesNotConfuseTheReaper(t *testing.T) {
	r := inChild(t)
	before := r.Orphans()
	var wg sync.WaitGroup
	// Failing execs race real exits: Go's ForkExec reaps a child whose exec
	// failed itself; under the registry lock the drain cannot steal it.
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_, err := r.Spawn(forkExec("/nonexistent/binary"), func(Status) { t.Error("a failed spawn got an exit") }, true)
				if !errors.Is(err, syscall.ENOENT) {
					t.Errorf("spawn of a missing binary: %v, want ENOENT", err)
				}
			}
		}()
	}
	done := make(chan Status, 50)
	for j := 0; j < 50; j++ {
		if _, err := r.Spawn(forkExec("/bin/true"), func(s Status) { done <- s }, true); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for j := 0; j < 50; j++ {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of 50 exits arrived", j)
		}
	}
	if n := r.Orphans() - before; n != 0 {
		t.Errorf("%d children were reaped as orphans; failed execs leaked into the drain", n)
	}
}

func TestInChildGroupStragglersAreKilledWhenTheLeaderExits(t *testing.T) {
	r := inChild(t)
	got := make(chan Status, 1)
	// The background sleep stays in the leader's group; it must not outlive it.
	pid, err := r.Spawn(forkExec("/bin/sh", "-c", "sleep 300 & echo $! > "+t.TempDir()+"/bg; exit 0"), func(s Status) { got <- s }, true)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no exit")
	}
	testutil.Eventually(t, "the straggler to be killed and reaped", func() bool { return len(children(t)) == 0 })
	if err := r.Signal(pid, syscall.SIGTERM, true); !errors.Is(err, ErrGone) {
		t.Errorf("Signal to a reaped pid: %v, want ErrGone", err)
	}
}

func TestInChildSignalReachesTheGroup(t *testing.T) {
	r := inChild(t)
	got := make(chan Status, 1)
	pid, err := r.Spawn(forkExec("/bin/sh", "-c", "sleep 300; exit 0"), func(s Status) { got <- s }, true)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "sleep to start", func() bool { return len(children(t)) >= 1 })
	if err := r.Signal(pid, syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if !s.Wait.Signaled() || s.Wait.Signal() != syscall.SIGKILL {
			t.Errorf("exit %v, want killed by SIGKILL", s.Wait)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit")
	}
	testutil.Eventually(t, "no children left", func() bool { return len(children(t)) == 0 })
}

func TestInChildAnAdoptedRunsStragglersEndWithIt(t *testing.T) {
	r := inChild(t)
	for _, parentWaits := range []bool{true, false} {
		// The leader L leads its own session with a background sleep in its
		// group. With parentWaits its parent stays (L is not ours: its end
		// comes through the pidfd); else L is reparented to us, the
		// subreaper (its end comes through the drain).
		dir := t.TempDir()
		script := `setsid sh -c 'echo $$ > ` + dir + `/leader; sleep 300 & echo $! > ` + dir + `/bg; exec sleep 300' &`
		if parentWaits {
			script += " wait"
		}
		if _, err := r.Spawn(forkExec("/bin/sh", "-c", script), func(Status) {}, false); err != nil {
			t.Fatal(err)
		}
		var leader, bg int
		testutil.Eventually(t, "the run to start", func() bool {
			leader, bg = readPid(dir+"/leader"), readPid(dir+"/bg")
			return leader > 0 && bg > 0
		})
		ticks, err := StartTicks(leader)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan Status, 1)
		if err := r.Adopt(leader, ticks, func(s Status) { got <- s }); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(leader, syscall.SIGKILL)
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no exit of the adopted run")
		}
		testutil.Eventually(t, "the adopted run's straggler to end", func() bool { return !testutil.Alive(bg) })
	}
	testutil.Eventually(t, "no children left", func() bool { return len(children(t)) == 0 })
}

func readPid(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// While paused, an exit stays a zombie (nothing is collected that an
// upgrade could lose); Resume delivers it. A child the reaper did not fork
// (handed over by an upgrade) is expected: its exit is held until Claim
// names the owner, who gets its exact status; Unexpect counts what nobody
// claimed as orphans.
func TestInChildPauseAndExpect(t *testing.T) {
	r := inChild(t)
	got := make(chan Status, 1)
	pid, err := r.Spawn(forkExec("/bin/sh", "-c", "sleep 0.1; exit 3"), func(s Status) { got <- s }, false)
	if err != nil {
		t.Fatal(err)
	}
	r.Pause()
	time.Sleep(400 * time.Millisecond)
	r.Drain()
	select {
	case s := <-got:
		t.Fatalf("collected while paused: %+v", s)
	default:
	}
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
		t.Errorf("not a zombie while paused: %s", b)
	}
	handed, err := forkExec("/bin/sh", "-c", "exit 7")() // not the reaper's: as after an exec
	if err != nil {
		t.Fatal(err)
	}
	stray, err := forkExec("/bin/sh", "-c", "exit 9")()
	if err != nil {
		t.Fatal(err)
	}
	r.Expect([]int{handed, stray}, false)
	r.Resume()
	if s := <-got; s.PID != pid || s.Wait.ExitStatus() != 3 {
		t.Errorf("after Resume: %+v", s)
	}
	testutil.Eventually(t, "the handed child to be collected", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.held[handed]
		return ok
	})
	orphans := r.Orphans()
	if !r.Claim(handed, func(s Status) { got <- s }) {
		t.Fatal("Claim of an expected pid")
	}
	if s := <-got; s.PID != handed || s.Wait.ExitStatus() != 7 {
		t.Errorf("claimed: %+v", s)
	}
	if r.Claim(handed, func(Status) {}) {
		t.Error("claimed twice")
	}
	testutil.Eventually(t, "the stray child to be collected", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.held[stray]
		return ok
	})
	r.Unexpect()
	if r.Orphans() != orphans+1 {
		t.Errorf("orphans %d, want %d", r.Orphans(), orphans+1)
	}
}

// A child the reaper did not fork (as an orphan the kernel hands a
// subreaper, or PID 1, with no Spawn) that exits while the process had no
// child at all is collected: an idle reaper listens to SIGCHLD.
func TestInChildIdleReaperHearsAChildItDidNotFork(t *testing.T) {
	r := inChild(t)
	testutil.Eventually(t, "no children", func() bool { return len(children(t)) == 0 })
	for i := range 3 {
		before := r.Orphans()
		if _, err := forkExec("/bin/sh", "-c", "sleep 0.2")(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, fmt.Sprintf("stray %d to be collected", i), func() bool { return r.Orphans() > before })
		testutil.Eventually(t, "no children", func() bool { return len(children(t)) == 0 })
	}
	// And a Spawn from idle gets its exit.
	got := make(chan Status, 1)
	if _, err := r.Spawn(forkExec("/bin/sh", "-c", "exit 5"), func(s Status) { got <- s }, true); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s.Wait.ExitStatus() != 5 {
			t.Errorf("exit %v, want 5", s.Wait)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit")
	}
}

const stopEnv = "TEND_REAPER_TEST_STOP"

// Once Stop returns the loop collects nothing more, though it was waiting
// in waitid when the child exited; Drain still collects.
func TestStop(t *testing.T) {
	if os.Getenv(stopEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStop$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), stopEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestStop") {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		return
	}
	r := New()
	if err := r.Start(false); err != nil {
		t.Fatal(err)
	}
	got := make(chan Status, 1)
	pid, err := r.Spawn(forkExec("/bin/sh", "-c", "sleep 0.2; exit 3"), func(s Status) { got <- s }, false)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	testutil.Eventually(t, "the child to exit", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return strings.Contains(string(b), ") Z ")
	})
	time.Sleep(200 * time.Millisecond) // the loop has woken by now
	select {
	case s := <-got:
		t.Fatalf("collected after Stop: %+v", s)
	default:
	}
	r.Drain()
	select {
	case s := <-got:
		if s.PID != pid || s.Wait.ExitStatus() != 3 {
			t.Errorf("Drain after Stop: %+v", s)
		}
	default:
		t.Fatal("Drain after Stop collected nothing")
	}
}

// Exits that come while the loop goes between idle (no child: it listens to
// SIGCHLD) and busy (it waits in waitid) are all collected: runs forked
// through Spawn, children it did not fork, and orphans handed to it, all
// exiting at once, round after round from no child at all. The idle tick is
// an hour here: a wake-up lost between the two ways of waiting would hang.
func TestInChildNoExitLostBetweenIdleAndBusy(t *testing.T) {
	r := inChild(t)
	const rounds, spawners, each = 20, 4, 5
	for round := range rounds {
		testutil.Eventually(t, "no children", func() bool { return len(children(t)) == 0 })
		before := r.Orphans()
		got := make(chan Status, spawners*each)
		var wg sync.WaitGroup
		for g := range spawners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					argv := []string{"/bin/true"}
					switch (g + i) % 3 {
					case 1:
						argv = []string{"/bin/sh", "-c", "(/bin/true &); exit 0"} // an orphan comes
					case 2:
						// Not through Spawn: an unregistered child, collected as an orphan.
						if _, err := forkExec("/bin/true")(); err != nil {
							t.Error(err)
						}
					}
					if _, err := r.Spawn(forkExec(argv...), func(s Status) { got <- s }, false); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		deadline := time.After(20 * time.Second)
		for range spawners * each {
			select {
			case <-got:
			case <-deadline:
				t.Fatalf("round %d: an owner never got its exit; children %v", round, children(t))
			}
		}
		testutil.Eventually(t, fmt.Sprintf("round %d: no children left", round), func() bool { return len(children(t)) == 0 })
		if r.Orphans() == before {
			t.Fatalf("round %d: no orphan counted", round)
		}
	}
}
