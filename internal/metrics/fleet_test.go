package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

func scrapeWith(t *testing.T, m *Metrics, query string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// instanceSeries counts the tend_instance_* series of program prog.
func instanceSeries(t *testing.T, text, prog string) int {
	n := 0
	for name, fam := range parse(t, text) {
		if !strings.HasPrefix(name, "tend_instance_") {
			continue
		}
		for _, s := range fam.Metric {
			if labelValue(s, "program") == prog {
				n++
			}
		}
	}
	return n
}

// The instances of transient programs (remove_on_exit) have no series of
// their own unless asked; the aggregates count every instance.
func TestTransientProgramsAreCountedNotListed(t *testing.T) {
	sts := append(fleet(), program.Status{ID: "run-1a2b3c4d:0", Program: "run-1a2b3c4d",
		State: program.StateRunning, Lifecycle: program.LifecycleRunning, PID: ptr(99)})
	src := fakeSource(sts)
	src.Transient = func(name string) bool { return strings.HasPrefix(name, "run-") }
	src.Programs = func() int { return 5 }
	bareCalls := 0
	src.Bare = func() []program.Status { bareCalls++; return sts }
	m := New(src)

	_, def := scrapeWith(t, m, "")
	if n := instanceSeries(t, def, "run-1a2b3c4d"); n != 0 {
		t.Errorf("default scrape: %d series of the transient program, want none", n)
	}
	if instanceSeries(t, def, "planner") == 0 {
		t.Error("default scrape: no series of planner")
	}
	fams := parse(t, def)
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"tend_instances_in_state", "state", "running", 2},
		{"tend_instances_in_state", "state", "fatal", 1},
		{"tend_instances_in_state", "state", "starting", 0},
		{"tend_instances_in_lifecycle", "lifecycle", "error", 2},
		{"tend_instances_in_lifecycle", "lifecycle", "running", 2},
	} {
		if v, ok := value(t, fams, c.name, map[string]string{c.label: c.value}); !ok || v != c.want {
			t.Errorf("%s{%s=%q} = %v, %v; want %v", c.name, c.label, c.value, v, ok, c.want)
		}
	}
	if v, _ := value(t, fams, "tend_programs", nil); v != 5 {
		t.Errorf("tend_programs = %v", v)
	}
	if v, _ := value(t, fams, "tend_programs_transient", nil); v != 1 {
		t.Errorf("tend_programs_transient = %v", v)
	}

	_, all := scrapeWith(t, m, "?instances=all")
	if instanceSeries(t, all, "run-1a2b3c4d") == 0 {
		t.Error("?instances=all: no series of the transient program")
	}
	_, none := scrapeWith(t, m, "?instances=none")
	for _, p := range []string{"planner", "worker", "run-1a2b3c4d"} {
		if n := instanceSeries(t, none, p); n != 0 {
			t.Errorf("?instances=none: %d series of %s", n, p)
		}
	}
	if bareCalls != 1 {
		t.Errorf("?instances=none read the bare list %d times, want once (no process trees)", bareCalls)
	}
	if _, ok := value(t, parse(t, none), "tend_instances_in_state", map[string]string{"state": "running"}); !ok {
		t.Error("?instances=none: no aggregates")
	}
	if code, body := scrapeWith(t, m, "?instances=some"); code != 400 || !strings.Contains(body, "want all or none") {
		t.Errorf("?instances=some: %d %s", code, body)
	}
}

// The fleet's counters count events, and outlive the instances counted.
func TestFleetCountersCountEvents(t *testing.T) {
	m := New(fakeSource(nil))
	code := 3
	for _, e := range []program.Event{
		{Kind: program.KindSpawned, Data: &program.Spawned{PID: 1, Run: 1}},
		{Kind: program.KindSpawned, Data: &program.Spawned{PID: 2, Run: 2}},
		{Kind: program.KindExited, Data: &program.Exited{Code: &code, LikelyCause: program.CauseRuntimeError}},
		{Kind: program.KindBackoff, Data: &program.Backoff{Reason: program.ReasonCrash}},
		{Kind: program.KindExited, Data: &program.Exited{LikelyCause: "no such cause"}},
		{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStarted}},
	} {
		m.CountEvent(e)
	}
	(*Metrics)(nil).CountEvent(program.Event{Kind: program.KindSpawned, Data: &program.Spawned{}})
	fams := parse(t, scrape(t, m))
	for _, c := range []struct {
		name  string
		label map[string]string
		want  float64
	}{
		{"tend_runs_started_total", nil, 2},
		{"tend_run_exits_total", map[string]string{"likely_cause": "runtime_error"}, 1},
		{"tend_run_exits_total", map[string]string{"likely_cause": "clean_exit"}, 0},
		{"tend_restarts_total", map[string]string{"reason": "crash"}, 1},
		{"tend_restarts_total", map[string]string{"reason": "clean_exit"}, 0},
	} {
		if v, ok := value(t, fams, c.name, c.label); !ok || v != c.want {
			t.Errorf("%s%v = %v, %v; want %v", c.name, c.label, v, ok, c.want)
		}
	}
	if n := len(fams["tend_run_exits_total"].Metric); n != len(likelyCauses) {
		t.Errorf("tend_run_exits_total has %d series, want one per cause (%d): an unknown cause makes none", n, len(likelyCauses))
	}
}
