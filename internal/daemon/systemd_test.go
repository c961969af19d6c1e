package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// fakeSystemd plays tend's service manager: it owns the socket that
// NOTIFY_SOCKET names, as systemd does for a Type=notify unit.
type fakeSystemd struct {
	addr   string
	msgs   chan notify.Message
	beats  int    // WATCHDOG=1 seen so far by until
	status string // the latest STATUS= seen by until
}

// newFakeSystemd sets NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (when
// not "") for the daemon the test runs in this process.
func newFakeSystemd(t *testing.T, watchdogUSec, watchdogPID string) *fakeSystemd {
	t.Helper()
	f := &fakeSystemd{msgs: make(chan notify.Message, 4096)}
	s, err := notify.Listen(filepath.Join(t.TempDir(), "systemd.sock"), func(m notify.Message) {
		select {
		case f.msgs <- m:
		default: // a test that stopped reading must not block the epoll loop
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.addr = s.Addr()
	t.Setenv("NOTIFY_SOCKET", f.addr)
	for k, v := range map[string]string{"WATCHDOG_USEC": watchdogUSec, "WATCHDOG_PID": watchdogPID} {
		if v != "" {
			t.Setenv(k, v)
		} else {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	return f
}

// until reads messages until one satisfies cond, counting heartbeats on
// the way; it fails the test after a generous deadline.
func (f *fakeSystemd) until(t *testing.T, what string, cond func(notify.Message) bool) notify.Message {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-f.msgs:
			if m.Watchdog {
				f.beats++
			}
			if m.Status != nil {
				f.status = *m.Status
			}
			if cond(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("tend never sent %s (%d heartbeats so far)", what, f.beats)
		}
	}
}

// untilStatus waits until the latest STATUS= starts with prefix.
func (f *fakeSystemd) untilStatus(t *testing.T, prefix string) {
	t.Helper()
	if !strings.HasPrefix(f.status, prefix) {
		f.until(t, "STATUS="+prefix+"...", func(notify.Message) bool { return strings.HasPrefix(f.status, prefix) })
	}
}

func statusText(m notify.Message) string {
	if m.Status == nil {
		return ""
	}
	return *m.Status
}

const systemdFleet = `[program.w]
command = ["/bin/sh", "-c", "echo \"notify=[$NOTIFY_SOCKET] watchdog=[$WATCHDOG_USEC] pid=[$WATCHDOG_PID]\"; exec sleep 1000"]
instances = 2
stop_grace = "2s"

[program.bad]
shell = "exit 3"
backoff_initial = "1h"
backoff_max = "1h"
`

// Under systemd, tend says READY=1 once the fleet has started, keeps
// STATUS= up to date with its counts, beats at WATCHDOG_USEC/2 and says
// STOPPING=1 when it stops; its runs never see its NOTIFY_SOCKET or
// WATCHDOG_*.
func TestUnderSystemd(t *testing.T) {
	f := newFakeSystemd(t, "400000", strconv.Itoa(os.Getpid()))
	dir := t.TempDir()
	c, stop := startDaemon(t, dir, systemdFleet)

	m := f.until(t, "READY=1", func(m notify.Message) bool { return m.Ready })
	if !strings.Contains(statusText(m), "running") {
		t.Errorf("READY=1 came with STATUS=%q, want the counts", statusText(m))
	}
	f.untilStatus(t, "2 running, 1 backoff, 0 fatal")
	// WATCHDOG_USEC 400 ms: a heartbeat each 200 ms.
	f.until(t, "heartbeats", func(notify.Message) bool { return f.beats >= 5 })

	var line string
	testutil.Eventually(t, "w:0's line", func() bool {
		line = logsOf(t, c, "w:0", client.LogOptions{Tail: -1})
		return strings.Contains(line, "notify=")
	})
	if strings.Contains(line, f.addr) || strings.Contains(line, "watchdog=[4") || strings.Contains(line, "pid=["+strconv.Itoa(os.Getpid())) {
		t.Errorf("a run saw tend's own systemd variables: %s", line)
	}

	stop()
	m = f.until(t, "STOPPING=1", func(m notify.Message) bool { return m.Stopping })
	if !strings.HasPrefix(statusText(m), "stopping") {
		t.Errorf("STOPPING=1 came with STATUS=%q", statusText(m))
	}
}

// WATCHDOG_PID naming another process means the variables were inherited,
// not meant for tend: no heartbeat, as sd_watchdog_enabled() says.
func TestUnderSystemdNoHeartbeatForAnotherPID(t *testing.T) {
	f := newFakeSystemd(t, "100000", "1")
	_, stop := startDaemon(t, t.TempDir(), "[program.w]\ncommand = [\"sleep\", \"1000\"]\nstop_grace = \"2s\"\n")
	f.until(t, "READY=1", func(m notify.Message) bool { return m.Ready })
	f.untilStatus(t, "1 running, 0 backoff, 0 fatal")
	stop()
	f.until(t, "STOPPING=1", func(m notify.Message) bool { return m.Stopping })
	if f.beats != 0 {
		t.Errorf("%d heartbeats with WATCHDOG_PID=1", f.beats)
	}
}

func TestFleetCounts(t *testing.T) {
	sts := []program.Status{
		{State: program.StateRunning}, {State: program.StateRunning}, {State: program.StateBackoff, Degraded: true},
		{State: program.StateStopped}, {State: program.StateStarting},
	}
	if got, want := fleetCounts(sts), "2 running, 1 backoff, 0 fatal, 1 starting, 1 stopped, 1 degraded"; got != want {
		t.Errorf("fleetCounts = %q, want %q", got, want)
	}
	if got, want := fleetCounts(nil), "0 running, 0 backoff, 0 fatal"; got != want {
		t.Errorf("fleetCounts(nil) = %q, want %q", got, want)
	}
}
