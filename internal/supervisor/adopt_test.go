package supervisor

import (
	"os"
	"testing"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
)

// A recorded run that is over by the time its instance takes it over (it
// died while no daemon watched, or as the daemon's check of it passed and
// before the reaper held it) is not started again as if nothing had
// happened: its end is counted as an adopted run's is, with the status
// unknown, and the restart policy decides (restart = "never": exited). It
// is never signalled, also when its pid names another process now (here
// this test's own process) and the operator had stopped it.
func TestAdoptingARunThatIsOver(t *testing.T) {
	// A pid that is gone: a run of this process, reaped.
	h0 := newHarness(t)
	short := spec("short", "/bin/true")
	short.Restart = program.RestartNever
	if _, err := h0.mgr.Add(short); err != nil {
		t.Fatal(err)
	}
	h0.waitFor("the short run to exit", func() bool { return h0.status("short:0").State == program.StateExited })
	gone := data[program.Exited](h0.matching(program.KindExited, "short:0")[0]).PID
	self := os.Getpid()
	ticks, err := reaper.StartTicks(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		a       Adoption
		stopped bool // the intent record says the operator stopped it
	}{
		{"pid gone during the adoption", Adoption{PID: gone, StartTicks: 1, Run: 3}, false},
		{"pid reused", Adoption{PID: self, StartTicks: ticks + 1, Run: 3}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.mgr.SetAdoptions(map[string]Adoption{"x:0": c.a})
			if c.stopped {
				h.mgr.SetIntents(map[string]kept.Intent{"x:0": {ID: "x:0", State: program.StateStopping, Stopped: true, Runs: 3}})
			}
			s := spec("x", "/bin/sh", "-c", "exec sleep 1000")
			s.Restart = program.RestartNever
			if _, err := h.mgr.Add(s); err != nil {
				t.Fatal(err)
			}
			want, cause := program.StateExited, program.CauseUnknown
			if c.stopped {
				want, cause = program.StateStopped, program.CauseOperatorStop
			}
			h.waitFor("the run's end to be counted", func() bool {
				st := h.status("x:0")
				return st.State == want && st.PID == nil && st.LastExit != nil
			})
			st := h.status("x:0")
			if st.LastExit.LikelyCause != cause || st.Run != 3 {
				t.Errorf("status: %+v, last exit %+v", st, *st.LastExit)
			}
			if n := len(h.matching(program.KindSpawned, "")); n != 0 {
				t.Errorf("%d runs spawned: the ended run's program was started again", n)
			}
			ex := h.matching(program.KindExited, "x:0")
			if len(ex) != 1 || data[program.Exited](ex[0]).PID != c.a.PID {
				t.Errorf("exited events: %v", ex)
			}
			if h.mgr.Adopted() != 0 {
				t.Errorf("adopted %d: a run that is over is not counted as adopted", h.mgr.Adopted())
			}
		})
	}
}
