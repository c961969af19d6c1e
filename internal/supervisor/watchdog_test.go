package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A client that asks go-systemd's SdWatchdogEnabled before it beats (as
// sd_watchdog_enabled users do) sees the program's watchdog, beats, and is
// never wedge-restarted. Without WATCHDOG_USEC and WATCHDOG_PID it would not
// beat, and would be restarted within a few seconds.
func TestCarefulClientBeatsUnderWatchdog(t *testing.T) {
	h := newHealthHarness(t)
	s := fakeSpec("careful", "careful")
	s.Watchdog, s.Ready = time.Second, program.ReadyNotify
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the client to see its watchdog", func() bool {
		out := h.output("careful:0")
		if strings.Contains(out, "watchdog not enabled") {
			t.Fatalf("SdWatchdogEnabled returned 0 in the run:\n%s", out)
		}
		return strings.Contains(out, "beating every 500ms")
	})
	h.waitFor("READY=1", func() bool { return h.status("careful:0").Ready })
	pid := *h.status("careful:0").PID
	// Several watchdog periods (and wedge checks) pass without a restart.
	time.Sleep(4 * time.Second)
	if st := h.status("careful:0"); st.Restarts.WedgeRestart != 0 || st.PID == nil || *st.PID != pid {
		t.Fatalf("the beating client was restarted: %+v\n%s", st, h.dump())
	}
}

// WATCHDOG_USEC=N from a run arms the watchdog even when the program has no
// `watchdog` key: a run that then goes silent is wedge-restarted.
func TestWatchdogUSecArmsWithoutWatchdogKey(t *testing.T) {
	if _, err := exec.LookPath("systemd-notify"); err != nil {
		testutil.Missing(t, "systemd-notify is not installed (Debian package systemd; .ci/run installs it)")
	}
	h := newHealthHarness(t)
	s := spec("arms", "/bin/sh", "-c", `systemd-notify WATCHDOG_USEC=700000 && echo armed; exec sleep 1000`)
	s.WedgeRestartGrace = 2 * time.Second
	if s.Watchdog != 0 {
		t.Fatalf("spec has watchdog %s", s.Watchdog)
	}
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a wedge restart", func() bool { return h.status("arms:0").Restarts.WedgeRestart >= 1 })
	w := h.matching(program.KindWedged, "arms:0")
	if len(w) == 0 || data[program.Wedged](w[0]).Source != "watchdog" {
		t.Fatalf("wedged: %+v", w)
	}
}

// A watchdog fires when it is due: a run silent for more than its 2 s
// watchdog is wedged then, not at the next whole second of a 1 s check
// (which made it up to a second late). The heartbeat comes a little past
// a second into the run, off the phase of such a check.
func TestWatchdogFiresWhenDue(t *testing.T) {
	h := newHealthHarness(t)
	gate := filepath.Join(t.TempDir(), "gate")
	s := fakeSpec("due", "gated-beat")
	s.Env["TEND_GATE"] = gate
	s.Watchdog, s.WedgeRestartGrace = 2*time.Second, time.Second
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the spawn", func() bool { return len(h.matching(program.KindSpawned, "due:0")) == 1 })
	time.Sleep(time.Until(h.matching(program.KindSpawned, "due:0")[0].TS.Add(1100 * time.Millisecond)))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var beat time.Time
	h.waitFor("the heartbeat", func() bool {
		_, after, ok := strings.Cut(h.output("due:0"), "beat at ")
		if !ok || !strings.Contains(after, "\n") {
			return false
		}
		n, err := strconv.ParseInt(after[:strings.IndexByte(after, '\n')], 10, 64)
		if err != nil {
			t.Fatalf("beat: %v", err)
		}
		beat = time.Unix(0, n)
		return true
	})
	h.waitFor("wedged", func() bool { return len(h.matching(program.KindWedged, "due:0")) >= 1 })
	w := h.matching(program.KindWedged, "due:0")[0]
	if d := data[program.Wedged](w); d.Source != "watchdog" {
		t.Fatalf("wedged: %+v", d)
	}
	// Slack for a loaded machine; a check on a 1 s tick would be late by
	// about 900 ms here. (The child reads its clock just after it beats:
	// the lower bound allows for that.)
	const slack = 600 * time.Millisecond
	late := w.TS.Sub(beat)
	t.Logf("wedged %s after the last heartbeat", late)
	if late < s.Watchdog-100*time.Millisecond || late > s.Watchdog+slack {
		t.Errorf("wedged %s after the last heartbeat, want within [%s, %s]", late, s.Watchdog, s.Watchdog+slack)
	}
}
