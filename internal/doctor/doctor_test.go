package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// testdata/demo holds the audit log of a 100-second run of examples/tend.toml,
// recorded with the real daemon and stopped with SIGTERM.
var (
	demoStart = time.Date(2026, 12, 2, 12, 8, 17, 0, time.UTC)
	demoEnd   = time.Date(2026, 12, 2, 12, 10, 1, 0, time.UTC)
)

// auditDir opens a copy of the audit files in src (testdata keeps its
// mode; a state directory is narrowed to 0700).
func auditDir(t *testing.T, src string) *statedir.Dir {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, err := statedir.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDoctorOnARecordedAuditLog(t *testing.T) {
	rep, err := Scan(auditDir(t, "testdata/demo"), demoStart, demoEnd)
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
	d := auditDir(t, dir)
	rep, err := Scan(d, demoStart.Add(50*time.Second), demoEnd)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Scan(auditDir(t, "testdata/demo"), demoStart, demoEnd)
	if rep.Events == 0 || rep.Events >= full.Events {
		t.Errorf("a later window counted %d events of %d", rep.Events, full.Events)
	}
	empty, err := Scan(d, demoEnd.Add(time.Hour), demoEnd.Add(2*time.Hour))
	if err != nil || empty.Events != 0 || len(empty.Advice) != 0 {
		t.Errorf("an empty window: %+v %v", empty, err)
	}
}

// TestDoctorReadsEveryPartOfADay: a day split into parts by audit_max_size
// is read whole.
func TestDoctorReadsEveryPartOfADay(t *testing.T) {
	src, err := os.ReadFile("testdata/demo/events-2026-12-02.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	dir := t.TempDir()
	third := len(lines) / 3
	for i, part := range []string{"events-2026-12-02.jsonl", "events-2026-12-02.1.jsonl", "events-2026-12-02.2.jsonl"} {
		chunk := lines[i*third:]
		if i < 2 {
			chunk = lines[i*third : (i+1)*third]
		}
		if err := os.WriteFile(filepath.Join(dir, part), []byte(strings.Join(chunk, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Scan(auditDir(t, dir), demoStart, demoEnd)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Scan(auditDir(t, "testdata/demo"), demoStart, demoEnd)
	if rep.Events != full.Events || len(rep.Advice) != len(full.Advice) {
		t.Errorf("parts: %d events, %d advice; one file: %d, %d", rep.Events, len(rep.Advice), full.Events, len(full.Advice))
	}
}

// A keeper that died (docs/terminal.md#a-keeper-that-dies) is one line of
// advice, counting each death and naming the last.
func TestDoctorSaysAKeeperDied(t *testing.T) {
	r := newReport(demoStart, demoEnd)
	two, none := 2, 0
	r.Add(program.Event{TS: demoStart.Add(time.Second), Kind: program.KindDaemon,
		Data: &program.DaemonPhase{Phase: program.PhaseKeeperReplaced, PID: 4001, Keeper: 4002, Count: &none}})
	r.Add(program.Event{TS: demoStart.Add(time.Minute), Kind: program.KindDaemon,
		Data: &program.DaemonPhase{Phase: program.PhaseKeeperReplaced, PID: 4002, Keeper: 4003, Count: &two}})
	r.Add(program.Event{TS: demoEnd.Add(time.Hour), Kind: program.KindDaemon, // outside the period
		Data: &program.DaemonPhase{Phase: program.PhaseKeeperReplaced, PID: 4003, Keeper: 4004, Count: &two}})
	r.finish()
	advice := strings.Join(r.Advice, "\n")
	want := "the keeper that holds tty runs' terminals died 2 time(s) (last: pid 4002 at 2026-12-02T12:09:17Z, replaced by pid 4003 holding 2 terminal(s) again)"
	if !strings.Contains(advice, want) {
		t.Errorf("advice lacks %q:\n%s", want, advice)
	}
	if r.Events != 0 {
		t.Errorf("a daemon event counted as a program's: %d", r.Events)
	}
}
