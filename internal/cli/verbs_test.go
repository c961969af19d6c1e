package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(shortDir(t), "tend.sock")
	for _, args := range [][]string{
		{"ps"}, {"status", "web:0"}, {"start", "web"}, {"stop", "web"}, {"restart", "web"},
		{"add", "x", "--", "true"}, {"rm", "x"}, {"logs", "web:0"}, {"events"}, {"events", "-f"},
		{"reload"}, {"down"},
	} {
		r := run(t, append([]string{"--socket", sock}, args...)...)
		r.wantErr(t, 4, "no tend daemon reachable at "+sock)
	}
}

func TestPs(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	t.Setenv("COLUMNS", "200")
	want := "" +
		"ID         STATE    LIFECYCLE  PID   UPTIME  RSS      CRASHES  RESTARTS              WHY\n" +
		"planner:0  running  idle       4242  1m21s   70.0MiB  0        2 (crash 1, rss 1)    up 1m21s; 1 crash and 1 memory drain since start\n" +
		"web:0      running  running    100   5s      -        0        0                     up 5s\n" +
		"web:1      backoff  error      -     -       -        4        4 (crash 3, clean 1)  backing off 8s after crash 4 of 5: exit 1 (runtime_error)\n"
	d.tend(t, "ps").want(t, 0, want)

	agents := d.tend(t, "ps", "--agents")
	if lines := strings.Split(strings.TrimSpace(agents.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "planner:0 ") {
		t.Errorf("ps --agents:\n%s", agents.stdout)
	}
}

func TestPsFitsWidth(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	// The columns before WHY take 85; at 100, WHY is cut to 15.
	t.Setenv("COLUMNS", "100")
	r := d.tend(t, "ps")
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("line of %d runes at COLUMNS=100: %q", n, line)
		}
	}
	if !strings.Contains(r.stdout, "  backing off 8s…\n") {
		t.Errorf("WHY not cut to fit:\n%s", r.stdout)
	}

	// Narrower than the other columns: WHY keeps a stub, and the table
	// stays aligned.
	t.Setenv("COLUMNS", "60")
	r = d.tend(t, "ps")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, line := range lines {
		if n := utf8.RuneCountInString(line); n > 85+human.MinWhy {
			t.Errorf("line of %d runes at COLUMNS=60: %q", n, line)
		}
	}
	if !strings.HasSuffix(lines[3], "  backing off…") || !strings.HasSuffix(lines[2], "  up 5s") {
		t.Errorf("WHY at COLUMNS=60:\n%s", r.stdout)
	}
	at := strings.Index(lines[0], "WHY")
	for _, line := range lines[1:] {
		if line[at-2:at] != "  " || line[at] == ' ' {
			t.Errorf("WHY column not aligned at %d: %q", at, line)
		}
	}

	// No COLUMNS and no terminal: 120.
	os.Unsetenv("COLUMNS")
	r = d.tend(t, "ps")
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("line of %d runes with no terminal: %q", n, line)
		}
	}
}

func TestPsJSON(t *testing.T) {
	d := startDaemon(t)
	r := d.tend(t, "ps", "--json")
	r.want(t, 0, "[]\n")

	d.fleet()
	r = d.tend(t, "ps", "--json")
	var list []program.Status
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 {
		t.Fatalf("ps --json: %v, %s", err, r.stdout)
	}
	var ids []string
	for _, st := range list {
		ids = append(ids, st.ID)
	}
	if !slices.Equal(ids, []string{"planner:0", "web:0", "web:1"}) {
		t.Errorf("ids = %v", ids)
	}
	if list[0].RSSBytes != 73400320 || *list[0].PID != 4242 {
		t.Errorf("fields lost: %+v", list[0])
	}
}

func TestStatus(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	r := d.tend(t, "status", "web:1")
	kv := statusFields(t, r.stdout)
	for key, want := range map[string]string{
		"id":        "web:1",
		"state":     "backoff",
		"lifecycle": "error",
		"why":       "backing off 8s after crash 4 of 5: exit 1 (runtime_error)",
		"pid":       "-",
		"crashes":   "4",
		"restarts":  "4 (crash 3, clean 1)",
		"last exit": "exit 1 (runtime_error) at -",
	} {
		if kv[key] != want {
			t.Errorf("%s: %q, want %q", key, kv[key], want)
		}
	}
	kv = statusFields(t, d.tend(t, "status", "planner:0").stdout)
	if kv["turn"] != "idle" || kv["rss"] != "70.0MiB" || kv["started"] != "- (up 1m21s)" {
		t.Errorf("agent status: %q", kv)
	}

	r = d.tend(t, "status", "web:0", "--json")
	var st program.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "web:0" || st.Why != "up 5s" {
		t.Errorf("status --json = %v %+v:\n%s", err, st, r.stdout)
	}
	if !strings.HasPrefix(r.stdout, "{") || strings.HasPrefix(r.stdout, "[") {
		t.Errorf("status --json is not one object")
	}

	d.tend(t, "status", "nope:0").wantErr(t, 3, "no such program or instance")
	d.tend(t, "status", "nope").wantErr(t, 3, "no such program or instance")
	r = d.tend(t, "status", "web", "--json")
	var list []program.Status
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) == 0 || list[0].ID != "web:0" {
		t.Errorf("status NAME --json = %v %+v:\n%s", err, list, r.stdout)
	}
	d.tend(t, "status").wantErr(t, 2, "an ID (NAME:K, NAME or all) or -l KEY=VALUE")
}

func TestActions(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "start", "web", "--no-wait").want(t, 0, "web:0\nweb:1\n")
	d.tend(t, "stop", "web:1", "--no-wait").want(t, 0, "web:1\n")
	d.tend(t, "restart", "all", "--no-wait").want(t, 0, "planner:0\nweb:0\nweb:1\n")
	if calls := d.b.Calls(); !slices.Equal(calls, []string{"start web", "stop web:1", "restart all"}) {
		t.Errorf("calls = %v", calls)
	}
	for _, verb := range []string{"start", "stop", "restart"} {
		d.tend(t, verb, "nope").wantErr(t, 3, "no such program or instance")
		d.tend(t, verb, "web:9").wantErr(t, 3, "no such program or instance")
		d.tend(t, verb, "Bad!").wantErr(t, 3, "bad id")
		d.tend(t, verb).wantErr(t, 2, "an ID (NAME:K, NAME or all) or -l KEY=VALUE")
		d.tend(t, verb, "a", "b").wantErr(t, 2, "accepts at most 1 arg")
		d.tend(t, verb, "web", "--no-wait", "--timeout", "1s").wantErr(t, 2, "--no-wait cannot go with")
		d.tend(t, verb, "web", "--timeout", "-1s").wantErr(t, 2, "--timeout")
	}
	d.tend(t, "start", "web", "--now").wantErr(t, 2, "unknown flag: --now")
	d.tend(t, "stop", "web", "--rolling").wantErr(t, 2, "unknown flag: --rolling")
	d.tend(t, "restart", "web", "--rolling", "--no-wait").wantErr(t, 2, "--no-wait cannot go with")
}

func TestAdd(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "add", "jobs", "--instances", "2", "--agent", "--", "python3", "-u", "worker.py").
		want(t, 0, "jobs:0\njobs:1\n")
	st, err := d.b.Status("jobs:1", nil)
	if err != nil || len(st) != 1 || !st[0].Agent {
		t.Errorf("added instance = %+v, %v", st, err)
	}
	// Without --, a command without flags works too.
	d.tend(t, "add", "once", "--restart", "never", "true").want(t, 0, "once:0\n")

	d.tend(t, "add", "web", "--", "x").wantErr(t, 1, "already exists")
	d.tend(t, "add", "bad", "--restart", "sometimes", "--", "x").wantErr(t, 2, "restart")
	d.tend(t, "add", "Bad Name", "--", "x").wantErr(t, 2, "name")
	d.tend(t, "add", "x").wantErr(t, 2, "missing the command")
	d.tend(t, "add", "--", "x").wantErr(t, 2, "NAME goes before --")
	d.tend(t, "add", "a", "b", "--", "x").wantErr(t, 2, "one NAME before --")
	d.tend(t, "add", "x", "--instances", "two", "--", "x").wantErr(t, 2, "invalid argument")
}

func TestRm(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "rm", "web").want(t, 0, "removed web\n")
	d.tend(t, "rm", "web").wantErr(t, 3, "no such program")
	d.tend(t, "rm").wantErr(t, 2, "tend rm -l KEY=VALUE")
	d.tend(t, "rm", "all").wantErr(t, 2, "tend rm -l KEY=VALUE")
}

func TestLogs(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	path := filepath.Join(d.b.LogDir, "web:0.log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.tend(t, "logs", "web:0", "-n", "2").want(t, 0, "two\nthree\n")
	d.tend(t, "logs", "web:0").want(t, 0, "one\ntwo\nthree\n")
	d.tend(t, "logs", "nope:0").wantErr(t, 3, "no such")
	d.tend(t, "logs", "web:0", "-n", "-1").wantErr(t, 2, "-n")

	out, stop := d.runBackground(t, "logs", "web:0", "-f", "-n", "1")
	testutil.Eventually(t, "the tail", func() bool { return out.String() == "three\n" })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("four\n")
	f.Close()
	testutil.Eventually(t, "the new line", func() bool { return out.String() == "three\nfour\n" })
	if code := stop(); code != 0 {
		t.Errorf("logs -f ended with %d", code)
	}
}

func publishFleetEvents(d *fakeDaemon) []program.Event {
	return []program.Event{
		d.ev.Publish(program.KindDaemon, "", program.DaemonPhase{Phase: "started", PID: 7}),
		d.ev.Publish(program.KindSpawned, "web:0", program.Spawned{PID: 100, Run: 1}),
		d.ev.Publish(program.KindExited, "web:0", program.Exited{PID: 100, Code: intp(1), RunDurationMS: 812,
			LikelyCause: "runtime_error", CrashCount: 2}),
		d.ev.Publish(program.KindSpawned, "web:1", program.Spawned{PID: 101, Run: 1}),
	}
}

func TestEvents(t *testing.T) {
	d := startDaemon(t)
	evs := publishFleetEvents(d)
	var all strings.Builder
	for _, e := range evs {
		all.WriteString(FormatEvent(e) + "\n")
	}
	d.tend(t, "events").want(t, 0, all.String())
	if !strings.Contains(all.String(), " #3 web:0 exited code=1 cause=runtime_error crash_count=2 run_ms=812\n") {
		t.Errorf("text lines:\n%s", all.String())
	}
	d.tend(t, "events", "--since", "3").want(t, 0, FormatEvent(evs[3])+"\n")
	d.tend(t, "events", "--kinds", "exited,daemon").want(t, 0, FormatEvent(evs[0])+"\n"+FormatEvent(evs[2])+"\n")
	d.tend(t, "events", "--id", "web:1").want(t, 0, FormatEvent(evs[3])+"\n")

	r := d.tend(t, "events", "--json", "--id", "web")
	var got []program.Event
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 3 || got[0].Seq != 2 {
		t.Errorf("events --json = %v:\n%s", err, r.stdout)
	}
	d.tend(t, "events", "--json", "--since", "9").want(t, 0, "[]\n")

	d.tend(t, "events", "--since", "-1").wantErr(t, 2, "--since")
	d.tend(t, "events", "--id", "Bad!").wantErr(t, 2, "bad id")
}

func TestEventsFollow(t *testing.T) {
	d := startDaemon(t)
	evs := publishFleetEvents(d)
	out, stop := d.runBackground(t, "events", "-f", "--since", "2")
	want := FormatEvent(evs[2]) + "\n" + FormatEvent(evs[3]) + "\n"
	testutil.Eventually(t, "the backlog", func() bool { return out.String() == want })
	live := d.ev.Publish(program.KindBackoff, "web:0", program.Backoff{MS: 2000, CrashCount: 2, Reason: "crash"})
	want += FormatEvent(live) + "\n"
	testutil.Eventually(t, "a live event", func() bool { return out.String() == want })
	if code := stop(); code != 0 {
		t.Errorf("events -f ended with %d", code)
	}

	// --json: one object a line.
	out, stop = d.runBackground(t, "events", "-f", "--json", "--kinds", "spawned")
	testutil.Eventually(t, "two lines", func() bool { return strings.Count(out.String(), "\n") == 2 })
	stop()
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e program.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Kind != "spawned" {
			t.Errorf("line %d %q: %v", i, line, err)
		}
	}
}

func TestReload(t *testing.T) {
	d := startDaemon(t)
	d.b.ReloadResult = api.ReloadResult{Added: []string{"a", "b"}, Changed: []string{"web"}, Unchanged: []string{"x"}}
	d.tend(t, "reload").want(t, 0, "added: a, b\nchanged: web\n")
	d.b.ReloadResult = api.ReloadResult{Unchanged: []string{"x"}}
	d.tend(t, "reload").want(t, 0, "no changes\n")

	problems := "tend.toml:3: program.web.instances: must be >= 1\ntend.toml:7: program.web.colour: unknown key"
	d.b.ReloadErr = errors.Join(program.ErrBadConfig, errors.New(problems))
	r := d.tend(t, "reload")
	if r.code != 2 || !strings.Contains(r.stderr, "\ntend.toml:3: program.web.instances: must be >= 1\ntend.toml:7: program.web.colour: unknown key\n") {
		t.Errorf("reload with a bad config: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestDown(t *testing.T) {
	first := startDaemon(t)
	first.b.OnShutdown = func() { first.srv.Close() }
	first.tend(t, "down").want(t, 0, "daemon stopped\n")
	first.tend(t, "ps").wantErr(t, 4, "no tend daemon reachable")

	// A daemon that never stops answering.
	d := startDaemon(t)
	old := downTimeout
	downTimeout = 300 * time.Millisecond
	t.Cleanup(func() { downTimeout = old })
	d.tend(t, "down").wantErr(t, 1, "still answers")
}

// tend version says the version and a digest of the binary, so that two
// builds of one version (before and after an upgrade) tell apart.
func TestVersion(t *testing.T) {
	r := run(t, "version")
	if r.code != 0 || !regexp.MustCompile(`^tend dev\+[0-9a-f]{12} \(go1\.`).MatchString(r.stdout) {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
}

// The version's digest comes from the Go build ID in the binary's first
// page, not from hashing the whole file.
func TestGoBuildIDNote(t *testing.T) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, size, ok := goBuildID(f)
	if !ok || strings.Count(string(id), "/") < 1 || size <= 0 {
		t.Fatalf("build id %q (size %d, ok %v): want the linker's a/b/… id", id, size, ok)
	}
	for _, head := range [][]byte{nil, []byte("#!/bin/sh\n"), []byte("\x7fELF\x04\x00\x00\x00Go\x00\x00")} {
		if got := noteGoBuildID(head); got != nil {
			t.Errorf("noteGoBuildID(%q) = %q, want nil", head, got)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"ps", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"ps", "extra"}, "unknown command"},
		{[]string{"logs", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"logs"}, "or -l KEY=VALUE"},
		{[]string{"events", "--since", "x"}, "--since"},
		{[]string{"version", "now"}, "unknown command"},
	} {
		r := run(t, tc.args...)
		r.wantErr(t, 2, tc.msg)
		if r.stdout != "" {
			t.Errorf("%v: stdout %q", tc.args, r.stdout)
		}
	}
	// Bare tend shows the usage, and is bad usage.
	r := run(t)
	if r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("bare tend: %d %q", r.code, r.stderr)
	}
	r = run(t, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Available Commands:") {
		t.Errorf("tend --help: %d %q", r.code, r.stdout)
	}
}

// statusFields reads the "key: value" block of tend status, checking that
// the values are aligned.
func statusFields(t *testing.T, out string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	at := -1
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		key, _, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("line %q is not key: value", line)
		}
		value := strings.TrimLeft(line[len(key)+1:], " ")
		if col := len(line) - len(value); at < 0 {
			at = col
		} else if col != at {
			t.Errorf("value of %q at column %d, others at %d", key, col, at)
		}
		kv[key] = value
	}
	return kv
}
