package main

import (
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// get is a GET over the daemon's socket: status and body.
func get(t *testing.T, sock, path string) (int, string) {
	t.Helper()
	resp, err := unixHTTP(sock).Get("http://tend" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// diskFleet: keep runs on (its run must never be doubled or lost), loop
// crashes all along (the fleet must stay supervised).
const diskFleet = `[daemon]
state_dir = "STATE"
[program.keep]
command = ["sleep", "1003"]
[program.loop]
shell = "sleep 0.2; exit 1"
backoff_initial = "50ms"
backoff_max = "100ms"
max_crashes = 1000000
`

// TestAFullDiskRefusesWhatItCannotKeep: with the state directory on a full
// file system, once the intent journal cannot take a line, an operator's
// stop is refused (507, exit 1) and changes nothing, while a crashing
// instance is still restarted; readyz, the metric and doctor say why.
// After a SIGKILL of the daemon and space freed, the next daemon adopts
// the run (never a second copy), the audit log marks the events it lost
// with a degraded_storage event, seq stays strictly increasing, and the
// stop now goes through.
func TestAFullDiskRefusesWhatItCannotKeep(t *testing.T) {
	disk := testutil.SmallDisk(t, "2m")
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	state := filepath.Join(disk, "state")
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, strings.ReplaceAll(diskFleet, "STATE", state))
	sock := filepath.Join(state, "tend.sock")
	c := client.New(sock)

	up := startUp(t, tend, conf)
	waitRunning(t, c, "keep:0")
	keepPID := *statusOf(t, c, "keep:0").PID
	filler := testutil.Fill(t, disk)

	// loop's churn fills the journal's last page; then nothing more fits.
	testutil.Eventually(t, "readyz to say the intent record cannot be kept", func() bool {
		code, body := get(t, sock, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "intent record")
	}, testutil.Within(time.Minute))

	code, out, errOut := tendRun(t, tend, "-c", conf, "stop", "keep:0")
	if code != 1 || !strings.Contains(errOut, "no space left on device") {
		t.Errorf("stop on a full disk: exit %d, %q %q; want exit 1 with the reason", code, out, errOut)
	}
	resp, err := unixHTTP(sock).Post("http://tend/v1/programs/keep:0/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(body), `"error"`) {
		t.Errorf("POST stop on a full disk: %d %s; want 507 with the reason", resp.StatusCode, body)
	}
	if st := statusOf(t, c, "keep:0"); st.State != program.StateRunning || *st.PID != keepPID {
		t.Errorf("keep after a refused stop: %+v", st)
	}
	if code, out, errOut := tendRun(t, tend, "-c", conf, "scale", "keep", "3"); code != 1 {
		t.Errorf("scale on a full disk: exit %d, %q %q; want exit 1", code, out, errOut)
	}
	if sts, err := c.Statuses("keep"); err != nil || len(sts) != 1 {
		t.Errorf("keep after a refused scale: %d instances, %v", len(sts), err)
	}
	run := statusOf(t, c, "loop:0").Run
	testutil.Eventually(t, "loop to be restarted on the full disk", func() bool { return statusOf(t, c, "loop:0").Run > run+2 })
	if _, metrics := get(t, sock, "/metrics"); !strings.Contains(metrics, `tend_state_write_errors_total{file="intent.json.log"}`) {
		t.Errorf("no tend_state_write_errors_total for the intent journal in /metrics")
	}
	if _, out, _ := tendRun(t, tend, "-c", conf, "doctor"); !strings.Contains(out, "cannot write intent.json.log") {
		t.Errorf("doctor on a full disk does not name it:\n%s", out)
	}

	killUp(t, up, up.Process.Pid, map[string]int{"keep:0": keepPID})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	up = startUp(t, tend, conf)
	waitRunning(t, c, "keep:0")
	if pid := *statusOf(t, c, "keep:0").PID; pid != keepPID {
		t.Errorf("keep after the kill: pid %d, was %d (a second copy)", pid, keepPID)
	}
	if code, out, errOut := tendRun(t, tend, "-c", conf, "stop", "keep:0"); code != 0 {
		t.Errorf("stop once there is room: exit %d %s%s", code, out, errOut)
	}
	testutil.Eventually(t, "keep's run to end", func() bool { return !testutil.Alive(keepPID) })

	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var gaps []*program.DaemonPhase
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Errorf("seq %d after %d", e.Seq, evs[i-1].Seq)
		}
		if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseDegradedStorage && d.LostFrom > 0 {
			if d.LostTo < d.LostFrom || d.LostTo >= e.Seq {
				t.Errorf("gap event at seq %d: lost %d to %d", e.Seq, d.LostFrom, d.LostTo)
			}
			gaps = append(gaps, d)
		}
	}
	for _, e := range evs { // a seq the gap names lost is not in the log
		for _, d := range gaps {
			if d.LostFrom <= e.Seq && e.Seq <= d.LostTo {
				t.Errorf("seq %d is in the log, and in the gap %d to %d", e.Seq, d.LostFrom, d.LostTo)
			}
		}
	}
	if len(gaps) == 0 {
		t.Errorf("no degraded_storage event marks the events lost:\n%s", dump(evs))
	}
	downAndGone(t, c, up, nil)
}

// verdictFleet: die exits with a fatal code (gave_up), once ends under
// restart = "never" (exited), each within a second of its start, so that
// the verdicts of 200 instances come one after another while the daemon
// is killed; none may run again after the kill.
const verdictFleet = `[program.die]
shell = "sleep 0.$(($$ % 10)); exit 3"
fatal_exit_codes = [3]
instances = 200
autostart = false
[program.once]
shell = "sleep 0.$(($$ % 10)); exit 0"
restart = "never"
instances = 5
autostart = false
`

// TestAVerdictIsNeverForgotten: 20 times, the fleet is started, the test
// waits for the first gave_up event in the audit log, kills the daemon
// after a random short delay and starts it again: an instance whose
// gave_up (or exited under never) was published never runs again.
func TestAVerdictIsNeverForgotten(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	sock := filepath.Join(dir, ".tend", "tend.sock")
	write(t, conf, verdictFleet)
	c := client.New(sock)
	up := startUp(t, tend, conf)
	testutil.Eventually(t, "the daemon to serve", func() bool { _, err := c.Status("die:0"); return err == nil })
	for try := range 20 {
		mark := lastSeq(t, c)
		if code, out, errOut := tendRun(t, tend, "-c", conf, "start", "--no-wait", "all"); code != 0 {
			t.Fatalf("try %d: start: %d %s%s", try, code, out, errOut)
		}
		testutil.Eventually(t, "a gave_up", func() bool {
			evs, err := c.Events(mark)
			return err == nil && len(find(evs, program.KindGaveUp, "")) > 0
		}, testutil.Every(time.Millisecond))
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // amid the others' verdicts
		killUp(t, up, up.Process.Pid, nil)
		up = startUp(t, tend, conf)
		testutil.Eventually(t, "the daemon to serve again", func() bool { _, err := c.Status("die:0"); return err == nil })
		time.Sleep(300 * time.Millisecond) // what would start again has done so by now
		evs, err := c.Events(mark)
		if err != nil {
			t.Fatal(err)
		}
		restarted := uint64(0)
		for _, e := range evs {
			if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseStarted {
				restarted = e.Seq
			}
		}
		judged := map[string]bool{}
		for _, e := range evs {
			if e.Seq > restarted {
				if e.Kind == program.KindSpawned && judged[e.ID] {
					t.Errorf("try %d: %s ran again after its verdict and a kill:\n%s", try, e.ID, dump(evs))
				}
				continue
			}
			switch {
			case e.Kind == program.KindGaveUp || e.Kind == program.KindExited && e.Program == "once":
				judged[e.ID] = true
			case e.Kind == program.KindSpawned: // started again by the operator since
				judged[e.ID] = false
			}
		}
		if t.Failed() {
			break
		}
	}
	downAndGone(t, c, up, nil)
}
