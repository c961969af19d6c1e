package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
)

var started = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// fleet is a few instances in different states, as broker.List would give.
func fleet() []program.Status {
	return []program.Status{
		{ // an agent between turns, restarted twice before
			ID: "planner:0", Program: "planner", Agent: true,
			State: program.StateRunning, Lifecycle: program.LifecycleIdle,
			PID: ptr(4242), Run: 3, StartedAt: program.Time{Time: started},
			Restarts: program.Restarts{Crash: 1, RSSWatchdog: 1},
			LastExit: &program.LastExit{Code: ptr(12), LikelyCause: program.CauseRSSWatchdog,
				At: program.Time{Time: started.Add(-time.Second)}},
			RSSBytes: 73400320, PeakRSS: 90000000,
		},
		{ // an agent whose restart waits for its turn to end
			ID: "chat:0", Program: "chat", Agent: true,
			State: program.StateStopping, Lifecycle: program.LifecycleRunning,
			PID: ptr(4343), Run: 1, StartedAt: program.Time{Time: started},
			TurnWaitUntil: &program.Time{Time: started.Add(10 * time.Minute)},
		},
		{ // backing off after an OOM kill, degraded
			ID: "worker:0", Program: "worker",
			State: program.StateBackoff, Lifecycle: program.LifecycleError,
			CrashCount: 4, Degraded: true,
			Restarts: program.Restarts{Crash: 4, CleanExit: 2, WedgeRestart: 1, OperatorRestart: 5},
			LastExit: &program.LastExit{Signal: ptr("SIGKILL"), LikelyCause: program.CauseOOMOrKill,
				At: program.Time{Time: started.Add(500 * time.Millisecond)}},
		},
		{ // gave up: its command does not exist
			ID: "worker:1", Program: "worker",
			State: program.StateFatal, Lifecycle: program.LifecycleError, CrashCount: 5,
			LastExit: &program.LastExit{LikelyCause: program.CauseSpawnFailed,
				At: program.Time{Time: started}},
		},
		{ // never started
			ID: "web:0", Program: "web",
			State: program.StateStopped, Lifecycle: program.LifecycleDone,
		},
	}
}

func fakeSource(sts []program.Status) Source {
	return Source{
		Statuses:        func() []program.Status { return sts },
		OrphansReaped:   func() uint64 { return 7 },
		EventsPublished: func() uint64 { return 1234 },
		SubscribersCut:  func() uint64 { return 2 },
		KeeperRestarts:  func() uint64 { return 3 },
	}
}

// scrape fetches /metrics over a real HTTP server, as Prometheus does.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text format", ct)
	}
	return string(body)
}

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return fams
}

// value finds the one series of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	var found []*dto.Metric
	for _, m := range fam.Metric {
		if hasLabels(m, want) {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return 0, false
	case 1:
	default:
		t.Fatalf("%s%v: %d series match", name, want, len(found))
	}
	m := found[0]
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	}
	t.Fatalf("%s%v: neither gauge nor counter", name, want)
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.Label {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func lbl(id string, kv ...string) map[string]string {
	prog, _, _ := strings.Cut(id, ":")
	l := map[string]string{"id": id, "program": prog}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

func TestScrapeReportsEachInstance(t *testing.T) {
	m := New(fakeSource(fleet()))
	for range 3 {
		m.CountNotifyDrop(fmt.Errorf("x: %w", notify.ErrMalformed))
	}
	m.CountNotifyDrop(notify.ErrOversized)
	fams := parse(t, scrape(t, m))

	type row struct {
		name   string
		labels map[string]string
		want   float64
	}
	rows := []row{
		{"tend_instance_up", lbl("planner:0"), 1},
		{"tend_instance_up", lbl("worker:0"), 0},
		{"tend_instance_up", lbl("web:0"), 0},
		{"tend_instance_state", lbl("planner:0", "state", "running"), 1},
		{"tend_instance_state", lbl("planner:0", "state", "starting"), 0},
		{"tend_instance_state", lbl("worker:0", "state", "backoff"), 1},
		{"tend_instance_state", lbl("worker:0", "state", "running"), 0},
		{"tend_instance_state", lbl("worker:1", "state", "fatal"), 1},
		{"tend_instance_state", lbl("web:0", "state", "stopped"), 1},
		{"tend_instance_lifecycle", lbl("planner:0", "lifecycle", "idle"), 1},
		{"tend_instance_lifecycle", lbl("planner:0", "lifecycle", "running"), 0},
		{"tend_instance_lifecycle", lbl("worker:0", "lifecycle", "error"), 1},
		{"tend_instance_lifecycle", lbl("web:0", "lifecycle", "done"), 1},
		{"tend_instance_restarts_total", lbl("planner:0", "cause", "crash"), 1},
		{"tend_instance_restarts_total", lbl("planner:0", "cause", "rss_watchdog"), 1},
		{"tend_instance_restarts_total", lbl("planner:0", "cause", "clean_exit"), 0},
		{"tend_instance_restarts_total", lbl("worker:0", "cause", "crash"), 4},
		{"tend_instance_restarts_total", lbl("worker:0", "cause", "clean_exit"), 2},
		{"tend_instance_restarts_total", lbl("worker:0", "cause", "wedge_restart"), 1},
		{"tend_instance_restarts_total", lbl("worker:0", "cause", "operator_restart"), 5},
		{"tend_instance_consecutive_crashes", lbl("worker:0"), 4},
		{"tend_instance_consecutive_crashes", lbl("planner:0"), 0},
		{"tend_instance_degraded", lbl("worker:0"), 1},
		{"tend_instance_degraded", lbl("worker:1"), 0},
		{"tend_instance_resident_memory_bytes", lbl("planner:0"), 73400320},
		{"tend_instance_resident_memory_bytes", lbl("web:0"), 0},
		{"tend_instance_peak_memory_bytes", lbl("planner:0"), 90000000},
		{"tend_instances_waiting_for_turn", map[string]string{}, 1},
		{"tend_instance_start_time_seconds", lbl("planner:0"), float64(started.Unix())},
		{"tend_instance_last_exit_code", lbl("planner:0"), 12},
		{"tend_instance_last_exit_signal", lbl("worker:0"), 9},
		{"tend_instance_last_exit_time_seconds", lbl("worker:0"), float64(started.Unix()) + 0.5},
		{"tend_instance_last_exit_info", lbl("planner:0", "likely_cause", "rss_watchdog"), 1},
		{"tend_instance_last_exit_info", lbl("worker:0", "likely_cause", "oom_or_external_kill"), 1},
		{"tend_instance_last_exit_info", lbl("worker:1", "likely_cause", "spawn_failed"), 1},
		{"tend_orphans_reaped_total", nil, 7},
		{"tend_keeper_restarts_total", nil, 3},
		{"tend_events_published_total", nil, 1234},
		{"tend_event_subscribers_cut_off_total", nil, 2},
		{"tend_notify_datagrams_dropped_total", map[string]string{"reason": "malformed"}, 3},
		{"tend_notify_datagrams_dropped_total", map[string]string{"reason": "oversized"}, 1},
		{"tend_notify_datagrams_dropped_total", map[string]string{"reason": "read_error"}, 0},
	}
	for _, r := range rows {
		got, ok := value(t, fams, r.name, r.labels)
		if !ok {
			t.Errorf("%s%v: missing", r.name, r.labels)
		} else if got != r.want {
			t.Errorf("%s%v = %v, want %v", r.name, r.labels, got, r.want)
		}
	}

	absent := []row{
		{name: "tend_instance_start_time_seconds", labels: lbl("worker:0")}, // nothing runs
		{name: "tend_instance_last_exit_code", labels: lbl("worker:0")},     // signalled
		{name: "tend_instance_last_exit_code", labels: lbl("worker:1")},     // never launched
		{name: "tend_instance_last_exit_signal", labels: lbl("planner:0")},  // exited with a code
		{name: "tend_instance_last_exit_signal", labels: lbl("worker:1")},
		{name: "tend_instance_last_exit_time_seconds", labels: lbl("web:0")}, // never ended
		{name: "tend_instance_last_exit_info", labels: lbl("web:0")},
	}
	for _, r := range absent {
		if v, ok := value(t, fams, r.name, r.labels); ok {
			t.Errorf("%s%v = %v, want no series", r.name, r.labels, v)
		}
	}

	// Every instance has a full set of enum series, exactly one of them 1.
	for _, enum := range []struct{ name, label string }{
		{"tend_instance_state", "state"}, {"tend_instance_lifecycle", "lifecycle"},
	} {
		fam := fams[enum.name]
		if fam.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v, want a gauge", enum.name, fam.GetType())
		}
		perID := map[string][2]int{} // series, ones
		for _, m := range fam.Metric {
			id := labelValue(m, "id")
			c := perID[id]
			c[0]++
			if m.Gauge.GetValue() == 1 {
				c[1]++
			}
			perID[id] = c
		}
		want := map[string]int{"tend_instance_state": len(states), "tend_instance_lifecycle": len(lifecycles)}[enum.name]
		for id, c := range perID {
			if c[0] != want || c[1] != 1 {
				t.Errorf("%s{id=%q}: %d series, %d of them 1; want %d and 1", enum.name, id, c[0], c[1], want)
			}
		}
		if len(perID) != len(fleet()) {
			t.Errorf("%s covers %d instances, want %d", enum.name, len(perID), len(fleet()))
		}
	}
	if got := fams["tend_instance_restarts_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("tend_instance_restarts_total is a %v, want a counter", got)
	}
	for _, std := range []string{"go_goroutines", "process_start_time_seconds", "tend_exit_detection_seconds"} {
		if _, ok := fams[std]; !ok {
			t.Errorf("%s missing from the scrape", std)
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.Label {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// The snapshot is read anew at each scrape: a removed instance leaves no
// series behind, an added one appears.
func TestScrapeFollowsTheSnapshot(t *testing.T) {
	sts := fleet()
	src := fakeSource(nil)
	src.Statuses = func() []program.Status { return sts }
	m := New(src)
	if _, ok := value(t, parse(t, scrape(t, m)), "tend_instance_up", lbl("web:0")); !ok {
		t.Fatal("web:0 missing from the first scrape")
	}
	sts = sts[:1]
	fams := parse(t, scrape(t, m))
	for _, id := range []string{"worker:0", "worker:1", "web:0"} {
		for name, fam := range fams {
			for _, s := range fam.Metric {
				if labelValue(s, "id") == id {
					t.Errorf("%s{id=%q} still reported after the instance was removed", name, id)
				}
			}
		}
	}
	if v, ok := value(t, fams, "tend_instance_up", lbl("planner:0")); !ok || v != 1 {
		t.Errorf("tend_instance_up{planner:0} = %v, %v; want 1", v, ok)
	}
}

// A Source function left nil leaves its metric out instead of failing.
func TestNilSourceFunctionsAreLeftOut(t *testing.T) {
	fams := parse(t, scrape(t, New(Source{EventsPublished: func() uint64 { return 1 }})))
	for name := range fams {
		if strings.HasPrefix(name, "tend_instance_") || name == "tend_orphans_reaped_total" || name == "tend_keeper_restarts_total" ||
			name == "tend_event_subscribers_cut_off_total" {
			t.Errorf("%s reported with no source", name)
		}
	}
	if v, ok := value(t, fams, "tend_events_published_total", nil); !ok || v != 1 {
		t.Errorf("tend_events_published_total = %v, %v; want 1", v, ok)
	}
}

// Every drop reason is a series from the first scrape, at zero; a drop of
// each kind the notify socket reports moves its own series only.
func TestNotifyDropsByReason(t *testing.T) {
	m := New(Source{})
	fams := parse(t, scrape(t, m))
	for _, r := range notify.DropReasons {
		if v, ok := value(t, fams, "tend_notify_datagrams_dropped_total", map[string]string{"reason": r}); !ok || v != 0 {
			t.Errorf("reason %q before any drop: %v, %v; want 0", r, v, ok)
		}
	}
	for _, err := range []error{
		fmt.Errorf("%w: empty datagram", notify.ErrMalformed),
		fmt.Errorf("%w: longer than 4096 bytes", notify.ErrOversized),
		fmt.Errorf("notify: %w: %w", notify.ErrRead, errors.New("EBADF")),
		fmt.Errorf("%w: no valid assignment", notify.ErrMalformed),
	} {
		m.CountNotifyDrop(err)
	}
	(*Metrics)(nil).CountNotifyDrop(notify.ErrMalformed) // a daemon without metrics
	fams = parse(t, scrape(t, m))
	for r, want := range map[string]float64{"malformed": 2, "oversized": 1, "read_error": 1} {
		if v, _ := value(t, fams, "tend_notify_datagrams_dropped_total", map[string]string{"reason": r}); v != want {
			t.Errorf("reason %q: %v, want %v", r, v, want)
		}
	}
	if n := len(fams["tend_notify_datagrams_dropped_total"].Metric); n != len(notify.DropReasons) {
		t.Errorf("%d series, want one per reason (%d)", n, len(notify.DropReasons))
	}
}

func TestExitDetectionHistogram(t *testing.T) {
	m := New(Source{})
	m.ObserveExitDetection(80 * time.Microsecond)
	m.ObserveExitDetection(3 * time.Millisecond)
	m.ObserveExitDetection(time.Second)
	(*Metrics)(nil).ObserveExitDetection(time.Second) // a daemon without metrics

	fam := parse(t, scrape(t, m))["tend_exit_detection_seconds"]
	if fam.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("tend_exit_detection_seconds is a %v, want a histogram", fam.GetType())
	}
	h := fam.Metric[0].Histogram
	if h.GetSampleCount() != 3 {
		t.Errorf("count = %d, want 3", h.GetSampleCount())
	}
	if got, want := h.GetSampleSum(), 1.00308; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("sum = %v, want %v", got, want)
	}
	cum := map[float64]uint64{}
	for _, b := range h.Bucket {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for le, want := range map[float64]uint64{50e-6: 0, 100e-6: 1, 3.2e-3: 2, 0.1024: 2} {
		if got, ok := cum[le]; !ok || got != want {
			t.Errorf("bucket le=%v: %d (present %v), want %d", le, got, ok, want)
		}
	}
}

// The collector describes exactly what it collects (a pedantic registry
// checks every collected metric against the descriptions).
func TestCollectorIsConsistent(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newCollector(fakeSource(fleet()), instancesDefault))
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// promlint runs the same checks as `promtool check metrics`, in process, so
// they hold even where promtool is not installed.
func TestScrapePassesPromlint(t *testing.T) {
	m := New(fakeSource(fleet()))
	m.ObserveExitDetection(time.Millisecond)
	problems, err := promlint.New(strings.NewReader(scrape(t, m))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestSignalNumber(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
		ok   bool
	}{
		{"SIGKILL", 9, true},
		{"SIGTERM", 15, true},
		{"SIGSYS", 31, true},
		{program.SignalName(34), 34, true},
		{program.SignalName(40), 40, true},
		{program.SignalName(99), 99, true},
		{"SIGRTMIN+x", 0, false},
		{"KILL?", 0, false},
		{"", 0, false},
	} {
		got, ok := signalNumber(tc.name)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("signalNumber(%q) = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
