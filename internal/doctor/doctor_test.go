package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// testdata/demo holds the audit log of a 100-second run of examples/tend.toml,
// recorded with the real daemon and stopped with SIGTERM.
var (
	demoStart = time.Date(2026, 12, 2, 12, 8, 17, 0, time.UTC)
	demoEnd   = time.Date(2026, 12, 2, 12, 10, 1, 0, time.UTC)
)

func TestDoctorOnARecordedAuditLog(t *testing.T) {
	rep, err := Scan("testdata/demo", demoStart, demoEnd)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 324-10 { // 3 daemon and 7 tracked_changed events concern no program
		t.Errorf("counted %d events", rep.Events)
	}
	byName := map[string]*program.DoctorProgram{}
	for _, p := range rep.Programs {
		byName[p.Program] = p
	}
	want := map[string]map[string]int{
		"crasher": {"runtime_error": 11},
		"drainer": {"rss_watchdog": 14},
		"batch":   {"clean_exit": 24},
	}
	for name, exits := range want {
		p := byName[name]
		if p == nil {
			t.Fatalf("no report for %s", name)
		}
		for cause, n := range exits {
			if p.Exits[cause] != n {
				t.Errorf("%s: %d %s exits, want %d", name, p.Exits[cause], cause, n)
			}
		}
	}
	if got := byName["drainer"].Warnings[program.WarnRSSLoop]; got != 12 {
		t.Errorf("drainer rss_watchdog_loop warnings: %d", got)
	}
	if rep.Programs[0].Program != "crasher" {
		t.Errorf("the crash loop is not ranked first: %s", rep.Programs[0].Program)
	}
	advice := strings.Join(rep.Advice, "\n")
	for _, line := range []string{
		"crasher crashed 11 times (runtime_error 11; last: exit 1 (runtime_error) on crasher:0): it is crash-looping; read tend logs crasher:0",
		"drainer hit its memory cap 14 times in 2 min: raise max_rss or fix the leak",
		"batch exited cleanly 24 times and passed its clean_restart_budget 16 times",
	} {
		if !strings.Contains(advice, line) {
			t.Errorf("advice lacks %q:\n%s", line, advice)
		}
	}
	for _, quiet := range []string{"worker", "planner", "stubborn"} {
		if strings.Contains(advice, quiet) {
			t.Errorf("advice about healthy %s:\n%s", quiet, advice)
		}
	}
}

func TestDoctorWindowAndTornLines(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/demo/events-2026-12-02.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// A torn last line, as a daemon killed mid-write could leave.
	torn := append(src, []byte(`{"seq":325,"ts":"2026-12-02T12:10:0`)...)
	if err := os.WriteFile(filepath.Join(dir, "events-2026-12-02.jsonl"), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	// An older day outside the window is not read at all.
	if err := os.WriteFile(filepath.Join(dir, "events-2026-11-01.jsonl"), []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Scan(dir, demoStart.Add(50*time.Second), demoEnd)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Scan("testdata/demo", demoStart, demoEnd)
	if rep.Events == 0 || rep.Events >= full.Events {
		t.Errorf("a later window counted %d events of %d", rep.Events, full.Events)
	}
	empty, err := Scan(dir, demoEnd.Add(time.Hour), demoEnd.Add(2*time.Hour))
	if err != nil || empty.Events != 0 || len(empty.Advice) != 0 {
		t.Errorf("an empty window: %+v %v", empty, err)
	}
}
