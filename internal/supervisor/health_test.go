package supervisor

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/testutil"
)

// Fake children: the test binary re-executed with TEND_FAKE_CHILD set plays a
// program written against go-systemd's daemon package, as a user's would be.
const fakeChildEnv = "TEND_FAKE_CHILD"

func TestMain(m *testing.M) {
	roles.Be() // the shim, when this binary is re-executed as one
	if mode := os.Getenv(fakeChildEnv); mode != "" {
		fakeChild(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func sdNotify(state string) {
	if ok, err := daemon.SdNotify(false, state); !ok || err != nil {
		fmt.Fprintf(os.Stderr, "sd_notify %q: sent=%v err=%v\n", state, ok, err)
		os.Exit(3)
	}
}

func fakeChild(mode string) {
	switch mode {
	case "heartbeat-then-hang": // three heartbeats, then alive but silent
		sdNotify("READY=1")
		for i := 0; i < 3; i++ {
			sdNotify("WATCHDOG=1")
			fmt.Println("beat")
			time.Sleep(200 * time.Millisecond)
		}
	case "careful": // beats only if SdWatchdogEnabled says so, as a careful client does
		if every, _ := daemon.SdWatchdogEnabled(false); every > 0 {
			sdNotify("READY=1")
			fmt.Println("beating every", every/2)
			for {
				sdNotify("WATCHDOG=1")
				time.Sleep(every / 2)
			}
		}
		fmt.Println("watchdog not enabled")
	case "gated-beat": // one heartbeat once the gate file exists, then alive but silent
		sdNotify("READY=1")
		for {
			if _, err := os.Stat(os.Getenv("TEND_GATE")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		sdNotify("WATCHDOG=1")
		fmt.Println("beat at", time.Now().UnixNano())
	case "trigger":
		sdNotify("READY=1")
		time.Sleep(300 * time.Millisecond)
		sdNotify("WATCHDOG=trigger")
	case "turns":
		sdNotify("X_TEND_TURN=active")
		fmt.Println("turn active")
		for {
			time.Sleep(time.Hour)
		}
	case "gated-turn": // a turn that lasts until the gate file exists, then idle
		sdNotify("X_TEND_TURN=active")
		for {
			if _, err := os.Stat(os.Getenv("TEND_GATE")); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		sdNotify("X_TEND_TURN=idle")
	case "flood": // READY=1 lost in a flood of turn flips would be a start_timeout crash
		for i := 0; i < 2000; i++ {
			sdNotify("X_TEND_TURN=active")
			if i == 1000 {
				sdNotify("READY=1\nSTATUS=ready in the flood")
			}
			sdNotify("X_TEND_TURN=idle")
		}
	case "ready-or-mute":
		readyOrMute()
	case "alloc": // grow past any small max_rss and stay there
		b := make([]byte, 96<<20)
		for i := range b {
			b[i] = 1
		}
		fmt.Println("allocated")
		for {
			time.Sleep(time.Hour)
			b[0]++
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}

// fakeSpec runs this test binary as a fake child in mode.
func fakeSpec(name, mode string) program.Spec {
	s := spec(name, os.Args[0], "-test.run=^$")
	s.Env = map[string]string{fakeChildEnv: mode}
	return s
}

func newHealthHarness(t *testing.T) *harness {
	t.Parallel()
	h := newHarness(t)
	h.mgr.deps.NotifyDir = t.TempDir()
	h.mgr.deps.Tree = proctree.New()
	h.mgr.mem = newMemWatch(h.mgr.deps.Tree)
	return h
}

func TestSystemdNotifyReadyStatusAndBarrier(t *testing.T) {
	if _, err := exec.LookPath("systemd-notify"); err != nil {
		testutil.Missing(t, "systemd-notify is not installed (Debian package systemd; .ci/run installs it)")
	}
	h := newHealthHarness(t)
	s := spec("ready", "/bin/sh", "-c", `sleep 0.3; systemd-notify --ready --status="waiting for work" && echo notified; exec sleep 1000`)
	s.Ready = program.ReadyNotify
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run to be starting", func() bool { return h.status("ready:0").PID != nil })
	if st := h.status("ready:0"); st.State != program.StateStarting {
		t.Fatalf("state %s before READY=1", st.State)
	}
	h.waitFor("READY=1", func() bool {
		st := h.status("ready:0")
		return st.State == program.StateRunning && st.Ready && st.StatusText == "waiting for work"
	})
	// systemd-notify waits on its BARRIER=1 pipe until the server closes the
	// fd; it only goes on (and says "notified") if we did.
	h.waitFor("systemd-notify to return 0", func() bool {
		return strings.Contains(h.output("ready:0"), "notified")
	})
}

func TestStartTimeoutIsACrash(t *testing.T) {
	h := newHealthHarness(t)
	s := spec("mute", "/bin/sh", "-c", "exec sleep 1000")
	s.Ready, s.StartTimeout, s.StopGrace = program.ReadyNotify, 300*time.Millisecond, time.Second
	s.BackoffInitial = time.Hour // one run is enough
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the start_timeout exit", func() bool { return len(h.matching(program.KindExited, "mute:0")) == 1 })
	x := data[program.Exited](h.matching(program.KindExited, "mute:0")[0])
	if x.LikelyCause != program.CauseStartTimeout || x.CrashCount != 1 {
		t.Errorf("exited: %+v", x)
	}
}

func TestStoppedHeartbeatIsAWedgeRestartNotACrash(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("beater", "heartbeat-then-hang")
	s.Watchdog, s.WedgeRestartGrace = 700*time.Millisecond, 2*time.Second
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a wedge restart", func() bool { return h.status("beater:0").Restarts.WedgeRestart >= 1 })
	w := h.matching(program.KindWedged, "beater:0")
	if len(w) == 0 || data[program.Wedged](w[0]).Source != "watchdog" || !strings.Contains(data[program.Wedged](w[0]).Detail, "no WATCHDOG=1") {
		t.Fatalf("wedged: %+v", w)
	}
	x := data[program.Exited](h.matching(program.KindExited, "beater:0")[0])
	if x.LikelyCause != program.CauseWedgeRestart || x.CrashCount != 0 {
		t.Errorf("exited: %+v", x)
	}
	b := data[program.Backoff](h.matching(program.KindBackoff, "beater:0")[0])
	if b.Reason != program.ReasonWedgeRestart || b.MS != 0 {
		t.Errorf("backoff: %+v", b)
	}
	if st := h.status("beater:0"); st.CrashCount != 0 {
		t.Errorf("crash_count %d after a wedge restart", st.CrashCount)
	}
}

func TestWatchdogTriggerActsAtOnce(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("trig", "trigger")
	s.WedgeChecks = 5 // a trigger does not wait for observations
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("wedged", func() bool { return len(h.matching(program.KindWedged, "trig:0")) >= 1 })
	if d := data[program.Wedged](h.matching(program.KindWedged, "trig:0")[0]); d.Detail != "the run sent WATCHDOG=trigger" {
		t.Errorf("wedged: %+v", d)
	}
}

func TestSilentWorkerIsWedgedByIdleOutput(t *testing.T) {
	h := newHealthHarness(t)
	s := spec("quiet", "/bin/sh", "-c", "echo hello; exec sleep 1000")
	s.IdleOutputTimeout, s.WedgeChecks = time.Second, 2
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("wedged", func() bool { return len(h.matching(program.KindWedged, "quiet:0")) >= 1 })
	if d := data[program.Wedged](h.matching(program.KindWedged, "quiet:0")[0]); d.Source != "idle_output" {
		t.Errorf("wedged: %+v", d)
	}
}

func TestFailingExecProbe(t *testing.T) {
	h := newHealthHarness(t)
	s := spec("probed", "/bin/sh", "-c", "exec sleep 1000")
	s.Probe = &program.Probe{Exec: []string{"/bin/sh", "-c", "echo db unreachable; exit 1"}, Interval: 200 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2}
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("wedged by the probe", func() bool { return len(h.matching(program.KindWedged, "probed:0")) >= 1 })
	d := data[program.Wedged](h.matching(program.KindWedged, "probed:0")[0])
	if d.Source != "probe" || !strings.Contains(d.Detail, "exit 1: db unreachable") {
		t.Errorf("wedged: %+v", d)
	}
}

func TestHTTPProbeAgainstARealListener(t *testing.T) {
	h := newHealthHarness(t)
	healthy := make(chan bool, 1)
	healthy <- true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := <-healthy
		healthy <- ok
		if !ok {
			http.Error(w, "sick", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	s := spec("web", "/bin/sh", "-c", "exec sleep 1000")
	s.Probe = &program.Probe{HTTP: srv.URL, Interval: 200 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2}
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // several healthy probes and health checks
	if n := len(h.matching(program.KindWedged, "web:0")); n != 0 {
		t.Fatalf("a healthy endpoint wedged the instance %d times", n)
	}
	<-healthy
	healthy <- false
	h.waitFor("wedged by the http probe", func() bool { return len(h.matching(program.KindWedged, "web:0")) >= 1 })
	if d := data[program.Wedged](h.matching(program.KindWedged, "web:0")[0]); d.Source != "probe" || !strings.Contains(d.Detail, "HTTP 503") {
		t.Errorf("wedged: %+v", d)
	}
}

func TestWedgeLoopWarnsAndPauses(t *testing.T) {
	h := newHealthHarness(t)
	s := spec("loopy", "/bin/sh", "-c", "exec sleep 1000")
	s.IdleOutputTimeout, s.WedgeLoopBudget, s.WedgeLoopWindow = time.Second, 1, time.Hour
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the loop warning", func() bool { return len(h.matching(program.KindHealthWarn, "loopy:0")) == 1 })
	w := data[program.HealthWarn](h.matching(program.KindHealthWarn, "loopy:0")[0])
	if w.Reason != program.WarnWedgeRestartLoop || w.Count != 2 || w.WindowMS != time.Hour.Milliseconds() {
		t.Errorf("health_warn: %+v", w)
	}
	pid := pidOf(h.status("loopy:0"))
	time.Sleep(2500 * time.Millisecond) // more wedged observations, but restarts are paused
	st := h.status("loopy:0")
	if pidOf(st) != pid || !alive(pid) || st.Restarts.WedgeRestart != 1 {
		t.Errorf("paused run: pid %d -> %d alive %v wedge restarts %d", pid, pidOf(st), alive(pid), st.Restarts.WedgeRestart)
	}
	if st.Wedge == nil || st.Wedge.PausedUntil.IsZero() {
		t.Errorf("status does not say the wedge restarts are paused: %+v", st.Wedge)
	}
	if n := len(h.matching(program.KindHealthWarn, "loopy:0")); n != 1 {
		t.Errorf("%d warnings during one pause, want 1", n)
	}
}

func TestMemoryWatchdogDrainsPastMaxRSS(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("hog", "alloc")
	s.MaxRSS, s.RSSBackoff = 48<<20, time.Hour
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the drain", func() bool { return len(h.matching(program.KindExited, "hog:0")) == 1 })
	r := h.matching(program.KindRSSExceeded, "hog:0")
	if len(r) != 1 || data[program.RSSExceeded](r[0]).RSSBytes <= 48<<20 || data[program.RSSExceeded](r[0]).MaxRSS != 48<<20 {
		t.Fatalf("rss_exceeded: %+v", r)
	}
	x := data[program.Exited](h.matching(program.KindExited, "hog:0")[0])
	if x.LikelyCause != program.CauseRSSWatchdog || x.CrashCount != 0 || x.MaxRSSBytes < 48<<20 {
		t.Errorf("exited: %+v", x)
	}
	b := data[program.Backoff](h.matching(program.KindBackoff, "hog:0")[0])
	if b.Reason != program.ReasonRSSWatchdog || b.MS != time.Hour.Milliseconds() {
		t.Errorf("backoff: %+v", b)
	}
}

func TestTurnComesFromXTendTurn(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("agent", "turns")
	s.Agent = true
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the turn", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		t := h.snaps["agent:0"].Turn
		return t != nil && *t
	})
}

func TestRunsAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		testutil.Missing(t, "useradd is not installed")
	}
	name := fmt.Sprintf("tendtest%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	h := newHealthHarness(t)
	// The state dir's notify dir is private (0700, as the daemon makes it):
	// the other user's socket goes to the short, traversable (not listable)
	// directory instead, as statedir.Runtime makes it.
	private, short := t.TempDir(), t.TempDir()
	os.Chmod(private, 0o700)
	os.Chmod(short, 0o711)
	os.Chmod(filepath.Dir(short), 0o711)
	h.mgr.deps.NotifyDir, h.mgr.deps.ShortDir = private, short
	s := spec("asuser", "/bin/sh", "-c", `echo "uid=$(id -un) home=$HOME user=$USER logname=$LOGNAME shell=$SHELL"; systemd-notify --ready --status="as $(id -un)" || echo notify failed; exec sleep 1000`)
	s.Cwd, s.User, s.Ready = "/", name, program.ReadyNotify
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run to say who it is", func() bool {
		return strings.Contains(h.output("asuser:0"), "uid="+name)
	})
	b := h.output("asuser:0")
	u, _ := user.Lookup(name)
	if want := fmt.Sprintf("home=%s user=%s logname=%s shell=/usr/sbin/nologin", u.HomeDir, name, name); !strings.Contains(b, want) {
		t.Errorf("the run's account environment: %q, want %q", b, want)
	}
	if _, err := exec.LookPath("systemd-notify"); err == nil {
		h.waitFor("READY=1 from the other user", func() bool {
			st := h.status("asuser:0")
			return st.State == program.StateRunning && st.StatusText == "as "+name
		})
	}
}
