package cli

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// sessions puts three labelled programs in the fake: s1a and s1b of
// session s-1, s2a of session s-2.
func (d *fakeDaemon) sessions() {
	pid := 7000
	for _, p := range []struct {
		name   string
		labels map[string]string
	}{
		{"s1a", map[string]string{"session": "s-1", "owner": "ana"}},
		{"s1b", map[string]string{"session": "s-1", "owner": "bob"}},
		{"s2a", map[string]string{"session": "s-2", "owner": "ana"}},
	} {
		d.b.Put(program.Status{ID: p.name + ":0", Program: p.name, Labels: p.labels, State: program.StateRunning,
			Lifecycle: program.LifecycleRunning, PID: &pid, Ready: true, Tracking: program.TrackingGroup})
	}
}

func TestLabelSelectors(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.sessions()

	r := d.tend(t, "ps", "-l", "session=s-1")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 3 ||
		!strings.HasPrefix(lines[1], "s1a:0") || !strings.HasPrefix(lines[2], "s1b:0") {
		t.Errorf("ps -l session=s-1: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.tend(t, "ps", "-l", "session=s-1", "-l", "owner=bob", "--show-labels")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], "LABELS") || !strings.Contains(lines[1], "owner=bob,session=s-1") {
		t.Errorf("ps with two -l and --show-labels:\n%s", r.stdout)
	}
	var list []program.Status
	r = d.tend(t, "ps", "-l", "owner=ana", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Errorf("ps -l --json: %v\n%s", err, r.stdout)
	}
	r = d.tend(t, "status", "-l", "session=s-2", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].ID != "s2a:0" {
		t.Errorf("status -l --json: %v\n%s", err, r.stdout)
	}
	if r := d.tend(t, "status", "s1a:0", "-l", "session=s-1"); r.code != 0 || !strings.Contains(r.stdout, "id:") {
		t.Errorf("status ID -l: %d %s%s", r.code, r.stdout, r.stderr)
	}

	// Without an ID, -l acts on every instance that matches.
	d.tend(t, "stop", "-l", "session=s-1", "--no-wait").want(t, 0, "s1a:0\ns1b:0\n")
	d.tend(t, "restart", "s2a", "-l", "owner=ana", "--no-wait").want(t, 0, "s2a:0\n")
	// Matching nothing is no error: a note on stderr.
	r = d.tend(t, "start", "-l", "session=s-9")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "no instance matches -l session=s-9") {
		t.Errorf("start -l matching nothing: %d %q %q", r.code, r.stdout, r.stderr)
	}
	d.tend(t, "rm", "-l", "owner=ana").want(t, 0, "removed s1a\nremoved s2a\n")
	d.tend(t, "rm", "s1b", "-l", "session=s-9").want(t, 0, "")
	d.tend(t, "rm", "all", "-l", "session=s-1").want(t, 0, "removed s1b\n")
	d.tend(t, "wait", "-l", "session=s-1", "--until", "running", "--timeout", "1s").wantErr(t, 3, "no instance matches -l session=s-1")

	want := []string{"stop all?label=session=s-1", "restart s2a?label=owner=ana", "start all?label=session=s-9?wait", "remove s1a", "remove s2a", "remove s1b"}
	if got := d.b.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// Every verb with -l refuses a malformed one before it asks the daemon,
// naming it (exit 2).
func TestBadLabelFlags(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	for _, args := range [][]string{
		{"ps", "-l", "session"},
		{"status", "-l", "session"},
		{"start", "-l", "session"},
		{"stop", "all", "-l", "session"},
		{"restart", "-l", "session"},
		{"logs", "-l", "session"},
		{"wait", "-l", "session", "--until", "done"},
		{"rm", "-l", "session"},
		{"events", "-l", "session"},
		{"run", "-l", "session", "--", "true"},
	} {
		d.tend(t, args...).wantErr(t, 2, `"session": want KEY=VALUE`)
	}
	d.tend(t, "ps", "-l", "Session=x").wantErr(t, 2, `label key "Session"`)
	d.tend(t, "ps", "-l", "k="+strings.Repeat("v", 257)).wantErr(t, 2, "257 characters")
	if calls := d.b.Calls(); len(calls) != 0 {
		t.Errorf("calls %v", calls)
	}
}

func TestRun(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	r := d.tend(t, "run", "-l", "session=s-3", "-e", "A=1", "-e", "B=x=y", "--", "sleep", "60")
	name := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(name) != len("run-12345678") || !strings.HasPrefix(name, "run-") {
		t.Fatalf("run: %d %q %q", r.code, r.stdout, r.stderr)
	}
	var body map[string]any
	if err := json.Unmarshal(d.b.Added(name), &body); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if body["name"] != name || body["cwd"] != wd || body["labels"].(map[string]any)["session"] != "s-3" ||
		body["env"].(map[string]any)["B"] != "x=y" || body["remove_on_exit"] != nil || body["restart"] != nil {
		t.Errorf("kept body %v", body)
	}
	// Flags after CMD are CMD's (tend run ls -l).
	d.tend(t, "run", "--name", "lister", "--rm", "ls", "-l").want(t, 0, "lister\n")
	body = nil
	if err := json.Unmarshal(d.b.Added("lister"), &body); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(body["command"].([]any), []any{"ls", "-l"}) || body["remove_on_exit"] != true || body["labels"] != nil {
		t.Errorf("run ls -l: %v", body)
	}
	d.tend(t, "run", "--name", "lister", "--", "true").wantErr(t, 1, "already exists")
	d.tend(t, "run", "--rm", "--restart", "always", "--", "true").wantErr(t, 2, "would never end")
	d.tend(t, "run", "--restart", "sometimes", "--", "true").wantErr(t, 2, "--restart")
	d.tend(t, "run", "--name", "Bad", "--", "true").wantErr(t, 2, "--name")
	d.tend(t, "run", "-e", "=x", "--", "true").wantErr(t, 2, "-e")
	d.tend(t, "run").wantErr(t, 2, "requires at least 1 arg")
}

// tend run --attach prints the run's output where it belongs and exits
// with its status; the fake daemon is played by the test.
func TestRunAttached(t *testing.T) {
	d := startDaemon(t)
	done := make(chan result, 1)
	go func() { done <- d.tend(t, "run", "--name", "job", "--rm", "-a", "--", "sh", "-c", "exit 3") }()
	testutil.Eventually(t, "the program to be added", func() bool { return d.b.Added("job") != nil })
	l, err := d.b.Log("job:0")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	l.Add(logfile.Record{TS: now, Stream: logfile.Stdout, Line: []byte("to stdout")})
	l.Add(logfile.Record{TS: now, Stream: logfile.Stderr, Line: []byte("to stderr")})
	l.Add(logfile.Record{TS: now, Stream: logfile.Stdout, Partial: true, Line: []byte("no newline")})
	l.Flush()
	code := 3
	d.ev.Publish(program.KindExited, "job:0", &program.Exited{Code: &code, LikelyCause: program.CauseRuntimeError})
	r := <-done
	if r.code != 3 || r.stdout != "to stdout\nno newline" || r.stderr != "to stderr\n" {
		t.Errorf("run -a: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	go func() { done <- d.tend(t, "run", "--name", "gone", "-a", "--", "/nonexistent") }()
	testutil.Eventually(t, "the program to be added", func() bool { return d.b.Added("gone") != nil })
	d.ev.Publish(program.KindSpawnFailed, "gone:0", &program.SpawnFailed{Error: "fork/exec /nonexistent: no such file or directory", Errno: "ENOENT"})
	d.ev.Publish(program.KindExited, "gone:0", &program.Exited{LikelyCause: program.CauseSpawnFailed})
	r = <-done
	if r.code != 127 || r.stderr != "tend: gone:0: fork/exec /nonexistent: no such file or directory\n" {
		t.Errorf("run -a of a missing binary: exit %d, stderr %q", r.code, r.stderr)
	}

	go func() { done <- d.tend(t, "run", "--name", "killed", "-a", "--", "sleep", "60") }()
	testutil.Eventually(t, "the program to be added", func() bool { return d.b.Added("killed") != nil })
	sig := "SIGKILL"
	d.ev.Publish(program.KindExited, "killed:0", &program.Exited{Signal: &sig, LikelyCause: program.CauseOOMOrKill})
	if r = <-done; r.code != 137 {
		t.Errorf("run -a of a run killed by SIGKILL: exit %d, want 137", r.code)
	}
}

func TestAddWithLabels(t *testing.T) {
	d := startDaemon(t)
	d.tend(t, "add", "jobs", "-l", "session=s-1", "-l", "owner=ana", "--", "sleep", "60").want(t, 0, "jobs:0\n")
	var body map[string]any
	if err := json.Unmarshal(d.b.Added("jobs"), &body); err != nil {
		t.Fatal(err)
	}
	if l := body["labels"].(map[string]any); l["session"] != "s-1" || l["owner"] != "ana" {
		t.Errorf("labels sent: %v", body["labels"])
	}
	d.tend(t, "add", "bad", "-l", "nope", "--", "true").wantErr(t, 2, `"nope": want KEY=VALUE`)
}
