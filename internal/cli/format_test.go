package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

func TestFormatEvent(t *testing.T) {
	ts := time.Date(2026, 12, 2, 12, 3, 4, 123e6, time.Local)
	sig := "SIGKILL"
	ev := func(seq uint64, kind, id string, data any) program.Event {
		e := program.Event{Seq: seq, TS: ts, Kind: kind, ID: id, Data: data}
		if name, _, ok := program.SplitID(id); ok {
			e.Program = name
		}
		return e
	}
	for _, tc := range []struct {
		e    program.Event
		want string
	}{
		{ev(42, "exited", "worker:0", program.Exited{PID: 9, Code: intp(1), RunDurationMS: 812, LikelyCause: "runtime_error", CrashCount: 2}),
			"12:03:04.123 #42 worker:0 exited code=1 cause=runtime_error crash_count=2 run_ms=812"},
		{ev(43, "exited", "worker:0", program.Exited{Signal: &sig, LikelyCause: "oom_or_external_kill", CrashCount: 3, RunDurationMS: 5}),
			"12:03:04.123 #43 worker:0 exited signal=SIGKILL cause=oom_or_external_kill crash_count=3 run_ms=5"},
		{ev(44, "exited", "worker:0", program.Exited{LikelyCause: "spawn_failed", CrashCount: 1}),
			"12:03:04.123 #44 worker:0 exited code=null cause=spawn_failed crash_count=1 run_ms=0"},
		{ev(1, "spawned", "web:1", program.Spawned{PID: 4242, Run: 3}),
			"12:03:04.123 #1 web:1 spawned pid=4242 run=3"},
		{ev(2, "spawn_failed", "web:1", program.SpawnFailed{Error: "exec: no such file", Errno: "ENOENT"}),
			`12:03:04.123 #2 web:1 spawn_failed error="exec: no such file" errno=ENOENT`},
		{ev(3, "backoff", "web:1", program.Backoff{MS: 2000, CrashCount: 2, Reason: "crash"}),
			"12:03:04.123 #3 web:1 backoff ms=2000 reason=crash crash_count=2"},
		{ev(4, "health_warn", "web:1", program.HealthWarn{Reason: "clean_restart_budget_exceeded", Count: 11, WindowMS: 60000}),
			"12:03:04.123 #4 web:1 health_warn reason=clean_restart_budget_exceeded count=11 window_ms=60000"},
		{ev(5, "health_warn", "web:1", program.HealthWarn{Reason: "crash_budget_degraded", Count: 5, Max: 5}),
			"12:03:04.123 #5 web:1 health_warn reason=crash_budget_degraded count=5 max=5"},
		{ev(6, "wedged", "web:1", program.Wedged{Source: "watchdog", Detail: "no WATCHDOG=1 for 30s"}),
			`12:03:04.123 #6 web:1 wedged source=watchdog detail="no WATCHDOG=1 for 30s"`},
		{ev(7, "rss_exceeded", "web:1", program.RSSExceeded{RSSBytes: 3 << 30, MaxRSS: 2 << 30}),
			"12:03:04.123 #7 web:1 rss_exceeded rss=3.0GiB max_rss=2.0GiB"},
		{ev(8, "gave_up", "web:1", program.GaveUp{CrashCount: 10, Max: 10}),
			"12:03:04.123 #8 web:1 gave_up crash_count=10 max=10"},
		{ev(9, "status_changed", "web:1", program.Status{ID: "web:1", Program: "web", Instance: 1, State: "running", Lifecycle: "running", Why: "up 1s"}),
			`12:03:04.123 #9 web:1 status_changed state=running lifecycle=running why="up 1s"`},
		{ev(10, "tracked_changed", "", program.TrackedChanged{Added: []string{"a:0", "b:0"}, Removed: []string{"c:0"}, Count: 2}),
			"12:03:04.123 #10 tracked_changed count=2 added=a:0,b:0 removed=c:0"},
		{ev(10, "tracked_changed", "", program.TrackedChanged{Added: []string{"a:0", "a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8", "a:9"}, Count: 10}),
			"12:03:04.123 #10 tracked_changed count=10 added=a:0,a:1,a:2,a:3,a:4,a:5,a:6,a:7,…+2"},
		{ev(11, "daemon", "", program.DaemonPhase{Phase: "started", PID: 77}),
			"12:03:04.123 #11 daemon phase=started pid=77"},
		{ev(12, "daemon", "", program.DaemonPhase{Phase: "adopted", Count: intp(2)}),
			"12:03:04.123 #12 daemon phase=adopted count=2"},
		{ev(13, "future_kind", "web:0", map[string]any{"b": 2, "a": "x y"}),
			`12:03:04.123 #13 web:0 future_kind a="x y" b=2`},
	} {
		if got := FormatEvent(tc.e); got != tc.want {
			t.Errorf("FormatEvent:\n got %s\nwant %s", got, tc.want)
		}
		// A decoded event (payloads behind pointers) prints the same line.
		b, err := json.Marshal(tc.e)
		if err != nil {
			t.Fatal(err)
		}
		var back program.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := FormatEvent(back); got != tc.want {
			t.Errorf("FormatEvent of decoded %s:\n got %s\nwant %s", b, got, tc.want)
		}
	}
}

// Every kind of the contract has its own fields, and no other kind does.
func TestEveryKindIsFormatted(t *testing.T) {
	for _, k := range program.Kinds() {
		if kindFields[k] == nil {
			t.Errorf("no fields for kind %s", k)
		}
	}
	if len(kindFields) != len(program.Kinds()) {
		t.Errorf("fields for %d kinds, program lists %d", len(kindFields), len(program.Kinds()))
	}
}
