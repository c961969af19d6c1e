package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/testutil"
)

// Fake runs: the test binary re-executed with childEnv set plays a program
// written against go-systemd's daemon package, as a user's would be.
const childEnv = "TEND_SPAWN_CHILD"

func TestMain(m *testing.M) {
	MaybeShim() // this binary re-executed as the shim
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(fakeRun(mode))
	}
	os.Exit(m.Run())
}

// report is what a fake run says about itself, on one stdout line.
type report struct {
	Enabled    time.Duration // go-systemd's SdWatchdogEnabled
	USec, PIDv string        // WATCHDOG_USEC and WATCHDOG_PID as given
	PID        int           // its own pid
	Marker     bool          // the shim's marker variable reached it
	SigBlk     string        // from /proc/self/status
	SigIgn     string
	FDs        []string // open descriptors (without the one that lists them)
}

const reportPrefix = "REPORT "

func fakeRun(mode string) int {
	var r report
	var err error
	r.Enabled, err = daemon.SdWatchdogEnabled(false)
	if err != nil {
		fmt.Println("SdWatchdogEnabled:", err)
		return 3
	}
	r.USec, r.PIDv = os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	r.PID = os.Getpid()
	_, r.Marker = os.LookupEnv(shimVar)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
				r.SigBlk = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
				r.SigIgn = strings.TrimSpace(v)
			}
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, _ := d.Readdirnames(-1)
		for _, n := range names {
			if n != strconv.Itoa(int(d.Fd())) {
				r.FDs = append(r.FDs, n)
			}
		}
		d.Close()
		slices.Sort(r.FDs)
	}
	b, _ := json.Marshal(r)
	fmt.Println(reportPrefix + string(b))
	if mode == "beat" && r.Enabled > 0 {
		// A careful client: it beats only because the watchdog is enabled.
		for range 3 {
			if ok, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); !ok || err != nil {
				fmt.Println("SdNotify:", ok, err)
				return 4
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return 0
}

// wait is the generous deadline for anything that should happen at once.
const wait = 30 * time.Second

// runner starts runs with a real reaper and collects their exits; their
// output goes through a real Capture.
type runner struct {
	t     *testing.T
	r     *reaper.Reaper
	rig   *rig
	exits chan reaper.Status
}

func newRunner(t *testing.T) *runner {
	t.Helper()
	r := reaper.New()
	if err := r.Start(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return &runner{t: t, r: r, rig: newRig(t, CaptureOptions{}), exits: make(chan reaper.Status, 16)}
}

// start starts s as instance 0 with the environment Env gives it. On
// success it arranges that the run is gone when the test ends.
func (rn *runner) start(s *program.Spec, notifySocket string) (int, *Output, error) {
	rn.t.Helper()
	out := NewOutput(rn.rig.c, program.InstanceID(s.Name, 0), smallLogs)
	rn.t.Cleanup(func() { out.Close() })
	pid, err := Start(rn.r, Request{Spec: s, Env: Env(s, 0, notifySocket), Out: out, Owner: func(st reaper.Status) { rn.exits <- st }})
	if err == nil {
		rn.t.Cleanup(func() { rn.r.Signal(pid, syscall.SIGKILL, true) })
	}
	return pid, out, err
}

// exit waits for the exit of pid, which must be the next one reaped.
func (rn *runner) exit(pid int) reaper.Status {
	rn.t.Helper()
	select {
	case st := <-rn.exits:
		if st.PID != pid {
			rn.t.Fatalf("the reaper routed the exit of pid %d, want %d", st.PID, pid)
		}
		return st
	case <-time.After(wait):
		rn.t.Fatalf("pid %d did not exit", pid)
		return reaper.Status{}
	}
}

// readReport waits for the run's report line in its captured output.
func (rn *runner) readReport(id string) report {
	rn.t.Helper()
	var lines []string
	var r report
	testutil.Eventually(rn.t, "the report in "+id+"'s output", func() bool {
		lines = lines[:0]
		for _, e := range readAll(rn.t, rn.rig.c, logfile.Query{Tail: -1}, id) {
			lines = append(lines, string(e.Line))
			if j, ok := strings.CutPrefix(string(e.Line), reportPrefix); ok {
				if err := json.Unmarshal([]byte(j), &r); err != nil {
					rn.t.Fatalf("report %q: %v", j, err)
				}
				return true
			}
		}
		return false
	}, testutil.Within(wait), testutil.Explain(func() string { return strings.Join(lines, "\n") }))
	return r
}

// output is what a run wrote, for failure messages.
func (rn *runner) output(id string) string {
	var b strings.Builder
	for _, e := range readAll(rn.t, rn.rig.c, logfile.Query{Tail: -1}, id) {
		b.Write(e.Line)
		b.WriteByte('\n')
	}
	return b.String()
}

func fakeSpec(name, mode string, watchdog time.Duration) *program.Spec {
	return &program.Spec{
		Name:     name,
		Command:  []string{os.Args[0], "-test.run=^$"},
		Env:      map[string]string{childEnv: mode},
		Watchdog: watchdog,
	}
}

// A run of a program with watchdog gets WATCHDOG_USEC and WATCHDOG_PID (its
// own pid), so go-systemd's SdWatchdogEnabled returns the interval and a
// careful client beats; the shim leaves no trace (same pid, no marker, no
// extra descriptor, the same signal mask and ignored signals as a run
// started directly).
func TestWatchdogRunGetsItsOwnPID(t *testing.T) {
	rn := newRunner(t)
	beats := make(chan notify.Message, 16)
	sock, err := notify.Listen(filepath.Join(t.TempDir(), "n.sock"), func(m notify.Message) { beats <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()

	pid, _, err := rn.start(fakeSpec("dog", "beat", 1500*time.Millisecond), sock.Addr())
	if err != nil {
		t.Fatal(err)
	}
	got := rn.readReport("dog:0")
	if st := rn.exit(pid); st.Wait.ExitStatus() != 0 {
		t.Fatalf("the run exited %v:\n%s", st.Wait, rn.output("dog:0"))
	}
	if got.PID != pid || got.PIDv != strconv.Itoa(pid) {
		t.Errorf("run pid %d, WATCHDOG_PID %q; Start returned %d", got.PID, got.PIDv, pid)
	}
	if got.USec != "1500000" || got.Enabled != 1500*time.Millisecond {
		t.Errorf("WATCHDOG_USEC %q, SdWatchdogEnabled %v; want 1500000 and 1.5s", got.USec, got.Enabled)
	}
	if got.Marker {
		t.Errorf("the shim's %s reached the program", shimVar)
	}
	for i := range 3 {
		select {
		case m := <-beats:
			if !m.Watchdog {
				t.Fatalf("message %d: %q, want WATCHDOG=1", i, m)
			}
		case <-time.After(wait):
			t.Fatalf("heartbeat %d did not arrive", i)
		}
	}

	// The same program without watchdog starts directly: nothing set, and
	// nothing else differs.
	pid, _, err = rn.start(fakeSpec("plain", "beat", 0), sock.Addr())
	if err != nil {
		t.Fatal(err)
	}
	plain := rn.readReport("plain:0")
	rn.exit(pid)
	if plain.USec != "" || plain.PIDv != "" || plain.Enabled != 0 {
		t.Errorf("a run without watchdog got WATCHDOG_USEC %q WATCHDOG_PID %q", plain.USec, plain.PIDv)
	}
	if got.SigBlk != plain.SigBlk || got.SigIgn != plain.SigIgn || !slices.Equal(got.FDs, plain.FDs) {
		t.Errorf("through the shim: SigBlk %s SigIgn %s fds %v; started directly: %s %s %v",
			got.SigBlk, got.SigIgn, got.FDs, plain.SigBlk, plain.SigIgn, plain.FDs)
	}
}

// A failed execve behind the shim is a spawn failure with its errno, the
// same error a direct exec gives; the shim's own exit never reaches the
// owner (the next exit routed is the next run's).
func TestShimExecFailureIsASpawnFailure(t *testing.T) {
	rn := newRunner(t)
	dir := t.TempDir()
	noexec := filepath.Join(dir, "data")
	if err := os.WriteFile(noexec, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, errno string
	}{
		{filepath.Join(dir, "missing"), "ENOENT"},
		{noexec, "EACCES"},
		{garbage, "ENOEXEC"},
	} {
		direct := &program.Spec{Name: "direct", Command: []string{tc.path}}
		shimmed := &program.Spec{Name: "shimmed", Command: []string{tc.path}, Watchdog: time.Second}
		_, _, derr := rn.start(direct, "")
		_, _, serr := rn.start(shimmed, "")
		if serr == nil || derr == nil {
			t.Fatalf("%s: started (direct %v, shimmed %v)", tc.path, derr, serr)
		}
		if Errno(serr) != tc.errno || serr.Error() != derr.Error() {
			t.Errorf("%s: shimmed %q (%s); direct %q, want %s both", tc.path, serr, Errno(serr), derr, tc.errno)
		}
		var errno syscall.Errno
		if !errors.As(serr, &errno) {
			t.Errorf("%s: %v does not wrap a syscall.Errno", tc.path, serr)
		}
	}
	pid, _, err := rn.start(&program.Spec{Name: "after", Command: []string{"/bin/true"}, Watchdog: time.Second}, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := rn.exit(pid); st.Wait.ExitStatus() != 0 {
		t.Fatalf("/bin/true through the shim: %v", st.Wait)
	}
	rn.r.Drain()
	if n := rn.r.Orphans(); n != 0 {
		t.Errorf("%d unowned children reaped: a failed shim escaped its collection", n)
	}
	select {
	case st := <-rn.exits:
		t.Errorf("an extra exit reached the owner: pid %d %v", st.PID, st.Wait)
	default:
	}
}

// A run of another user goes through the shim too: the credentials apply
// before the shim runs, and /proc/self/exe reaches the daemon's binary
// whatever its directory allows that user.
func TestShimRunsAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another user")
	}
	if _, err := Credential("nobody", ""); err != nil {
		t.Skip("no user nobody")
	}
	// The program itself must be where nobody can run it: a copy of the
	// test binary in a directory open to all.
	dir, err := os.MkdirTemp("", "tend-shim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "fake-run")
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	rn := newRunner(t)
	s := fakeSpec("other", "report", 2*time.Second)
	s.Command[0], s.User, s.Cwd = bin, "nobody", "/"
	pid, _, err := rn.start(s, "")
	if err != nil {
		t.Fatal(err)
	}
	got := rn.readReport("other:0")
	if st := rn.exit(pid); st.Wait.ExitStatus() != 0 {
		t.Fatalf("exited %v:\n%s", st.Wait, rn.output("other:0"))
	}
	if got.PIDv != strconv.Itoa(pid) || got.Enabled != 2*time.Second {
		t.Errorf("WATCHDOG_PID %q (pid %d), SdWatchdogEnabled %v", got.PIDv, pid, got.Enabled)
	}
}

// tend's own WATCHDOG_USEC and WATCHDOG_PID (systemd's, when tend runs with
// WatchdogSec) never reach a run; the program's watchdog, or its env, sets
// them.
func TestEnvWatchdogVariables(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "90000000")
	t.Setenv("WATCHDOG_PID", "1")
	defer func(old func() []string) { baseEnv = old }(baseEnv)
	baseEnv = os.Environ
	vars := func(env []string) (out []string) {
		for _, kv := range env {
			if strings.HasPrefix(kv, "WATCHDOG_") {
				out = append(out, kv)
			}
		}
		return out
	}
	s := &program.Spec{Name: "w"}
	if got := vars(Env(s, 0, "")); len(got) != 0 {
		t.Errorf("without watchdog: %q inherited from tend", got)
	}
	s.Watchdog = 30 * time.Second
	if got := vars(Env(s, 0, "")); !slices.Equal(got, []string{"WATCHDOG_USEC=30000000"}) {
		t.Errorf("watchdog 30s: %q", got)
	}
	s.Env = map[string]string{"WATCHDOG_USEC": "5"}
	if got := vars(Env(s, 0, "")); !slices.Equal(got, []string{"WATCHDOG_USEC=5"}) {
		t.Errorf("the spec's own: %q", got)
	}
}

func TestShimEnv(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"A=1", shimVar + "=3", "WATCHDOG_USEC=5"}, []string{"A=1", "WATCHDOG_USEC=5", "WATCHDOG_PID=42"}},
		{[]string{"WATCHDOG_PID=1", "B=2", "WATCHDOG_PID=7", shimVar + "=9"}, []string{"WATCHDOG_PID=42", "B=2"}},
		{nil, []string{"WATCHDOG_PID=42"}},
	} {
		if got := shimEnv(tc.in, 42); !slices.Equal(got, tc.want) {
			t.Errorf("shimEnv(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The marker alone does not make a shim: tend started with TEND_EXEC_SHIM in
// its environment (leaked from somewhere) still runs as itself.
func TestMarkerAloneIsNotAShim(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestShimEnv$")
	cmd.Env = append(os.Environ(), shimVar+"=3")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("the test binary with %s set: %v\n%s", shimVar, err, out)
	}
}

// The price of the shim, paid by watchdog programs only: the start of a Go
// runtime before the program's own exec, under the reaper's lock.
func BenchmarkStart(b *testing.B) {
	r := reaper.New()
	if err := r.Start(false); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	exits := make(chan reaper.Status, 1)
	out := NewOutput(nil, "b:0", program.Logs{}) // output to /dev/null
	for _, wd := range []time.Duration{0, time.Second} {
		name := map[bool]string{false: "direct", true: "shim"}[wd > 0]
		b.Run(name, func(b *testing.B) {
			s := &program.Spec{Name: "b", Command: []string{"/bin/true"}, Watchdog: wd}
			env := Env(s, 0, "")
			for b.Loop() {
				pid, err := Start(r, Request{Spec: s, Env: env, Out: out, Owner: func(st reaper.Status) { exits <- st }})
				if err != nil {
					b.Fatal(err)
				}
				if st := <-exits; st.PID != pid {
					b.Fatalf("exit of %d, want %d", st.PID, pid)
				}
			}
		})
	}
}

// A run whose output cannot be watched once it is forked is killed and
// reported as a spawn failure: its exit never reaches the owner, and
// nothing of it is left.
func TestUnwatchedRunIsKilled(t *testing.T) {
	rn := newRunner(t)
	watchRun = func(o *Output, p *runPipes) error {
		if err := o.watchRun(p); err != nil {
			return err
		}
		return errors.New("watching output: refused")
	}
	t.Cleanup(func() { watchRun = (*Output).watchRun })
	for _, s := range []*program.Spec{
		{Name: "direct", Command: []string{"/bin/sleep", "1000"}},
		{Name: "shimmed", Command: []string{"/bin/sleep", "1000"}, Watchdog: time.Second},
	} {
		before := sleepers(t)
		if _, _, err := rn.start(s, ""); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: Start = %v, want the watch's error", s.Name, err)
		}
		testutil.Eventually(t, s.Name+"'s run gone", func() bool {
			rn.r.Drain()
			return len(sleepers(t)) == len(before)
		}, testutil.Within(wait))
	}
	select {
	case st := <-rn.exits:
		t.Errorf("the killed run's exit reached the owner: pid %d %v", st.PID, st.Wait)
	case <-time.After(100 * time.Millisecond):
	}
	if n := rn.r.Orphans(); n != 0 {
		t.Errorf("%d unowned children reaped: the killed run was not the launch's", n)
	}
}

// sleepers lists this process's children running sleep, zombies aside.
func sleepers(t *testing.T) []int {
	t.Helper()
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil && strings.HasSuffix(exe, "sleep") && testutil.Alive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Begin hands the fork over and Wait gives its pid, whose exit reaches the
// owner; runs started that way, and probes, from many goroutines at once,
// all come through (the forker thread takes the registry lock itself, and
// nobody holds it while waiting for the thread).
func TestBeginWaitAndProbesTogether(t *testing.T) {
	rn := newRunner(t)
	out := NewOutput(rn.rig.c, "bw:0", smallLogs)
	t.Cleanup(func() { out.Close() })
	s := &program.Spec{Name: "bw", Command: []string{"/bin/sh", "-c", "exit 4"}}
	exits := make(chan reaper.Status, 64)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	pids := make(chan int, 64)
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 8 {
				p, err := Begin(rn.r, Request{Spec: s, Env: Env(s, 0, ""), Out: out, Owner: func(st reaper.Status) { exits <- st }})
				if err != nil {
					errs <- err
					return
				}
				pid, err := p.Wait()
				if err != nil {
					errs <- err
					return
				}
				pids <- pid
			}
		}()
		go func() {
			defer wg.Done()
			for range 8 {
				if err := Probe(rn.r, []string{"/bin/true"}, "", nil, nil, wait); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(pids)
	want := map[int]bool{}
	for pid := range pids {
		want[pid] = true
	}
	for range len(want) {
		select {
		case st := <-exits:
			if !want[st.PID] || st.Wait.ExitStatus() != 4 {
				t.Fatalf("exit of pid %d (%v) is not one of the runs'", st.PID, st.Wait)
			}
			delete(want, st.PID)
		case <-time.After(wait):
			t.Fatalf("%d runs' exits missing", len(want))
		}
	}
	if n := rn.r.Orphans(); n != 0 {
		t.Errorf("%d children collected as nobody's", n)
	}
}
