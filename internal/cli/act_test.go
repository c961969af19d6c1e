package cli

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The waiting verbs against the fake backend, which does each action at
// once and answers like the daemon: statuses, and the instances that
// failed with why.
func TestActionsWait(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "stop", "web").want(t, 0, "web:0 stopped\nweb:1 stopped\n")
	d.tend(t, "start", "web").want(t, 0, "web:0 running pid 5001\nweb:1 running pid 5002\n")
	d.tend(t, "restart", "web:1").want(t, 0, "web:1 running pid 5003\n")
	d.tend(t, "stop", "planner:0", "--now").want(t, 0, "planner:0 stopped\n")
	d.tend(t, "restart", "planner", "--now", "--timeout", "30s").want(t, 0, "planner:0 running pid 5004\n")
	want := []string{"stop web?wait", "start web?wait", "restart web:1?wait", "stop planner:0?wait?now", "restart planner?wait?now"}
	if calls := d.b.Calls(); !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}

	// One instance fails: every line is printed, the why goes to stderr,
	// exit 1.
	d.b.FailStart("web:1", "exit 1 (runtime_error) before it was running")
	r := d.tend(t, "restart", "web")
	if r.code != 1 || r.stdout != "web:0 running pid 5005\nweb:1 backoff\n" ||
		r.stderr != "tend: web:1: exit 1 (runtime_error) before it was running\n" {
		t.Errorf("restart with a failing instance: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestActionsTimeout(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.b.WaitDelay = time.Minute
	start := time.Now()
	r := d.tend(t, "stop", "web", "--timeout", "200ms")
	if r.code != 1 || r.stdout == "" ||
		!strings.Contains(r.stderr, "tend: web:0: not done when the wait ended") ||
		!strings.Contains(r.stderr, "tend: web:1: not done when the wait ended") {
		t.Errorf("stop --timeout: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("stop --timeout 200ms took %s", took)
	}
	// --no-wait does not wait for a slow daemon's wait.
	d.tend(t, "stop", "web", "--no-wait").want(t, 0, "web:0\nweb:1\n")
}

// A rolling restart is one restart with a wait per instance, in order; a
// failed one stops the roll, and the rest are left alone.
func TestRollingRestart(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "scale", "web", "4").want(t, 0, "web:0\nweb:1\nweb:2\nweb:3\n")
	d.tend(t, "restart", "web", "--rolling").want(t, 0,
		"web:0 running pid 5003\nweb:1 running pid 5004\nweb:2 running pid 5005\nweb:3 running pid 5006\n")
	want := []string{"scale web 4", "restart web:0?wait", "restart web:1?wait", "restart web:2?wait", "restart web:3?wait"}
	if calls := d.b.Calls(); !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}

	d.b.FailStart("web:1", "exit 1 (runtime_error) before it was running")
	r := d.tend(t, "restart", "web", "--rolling", "--now")
	if r.code != 1 || r.stdout != "web:0 running pid 5007\nweb:1 backoff\n" ||
		r.stderr != "tend: web:1: exit 1 (runtime_error) before it was running\n"+
			"tend: rolling restart stopped; not restarted: web:2, web:3\n" {
		t.Errorf("rolling restart with a failure: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if calls := d.b.Calls(); !slices.Equal(calls[len(want):], []string{"restart web:0?wait?now", "restart web:1?wait?now"}) {
		t.Errorf("calls = %v: the roll went on past a failure", calls)
	}

	// The timeout bounds the whole roll.
	d.b.FailStart("web:1", "")
	d.b.WaitDelay = time.Minute
	r = d.tend(t, "restart", "web", "--rolling", "--timeout", "200ms")
	if r.code != 1 || !strings.Contains(r.stderr, "tend: web:0: not done when the wait ended") ||
		!strings.Contains(r.stderr, "not restarted: web:1, web:2, web:3\n") {
		t.Errorf("rolling restart --timeout: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d.tend(t, "restart", "nope", "--rolling").wantErr(t, 3, "no such program")
}

func TestScale(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "scale", "web", "3").want(t, 0, "web:0\nweb:1\nweb:2\n")
	if r := d.tend(t, "status", "web:2"); r.code != 0 || !strings.Contains(r.stdout, "state:     running") {
		t.Errorf("status of a new instance: exit %d, %q", r.code, r.stdout)
	}
	d.tend(t, "scale", "web", "1").want(t, 0, "web:0\n")
	d.tend(t, "status", "web:1").wantErr(t, 3, "no such")
	d.tend(t, "scale", "nope", "1").wantErr(t, 3, "no such program")
	d.tend(t, "scale", "web", "--", "-1").wantErr(t, 2, "N is a number of instances")
	d.tend(t, "scale", "web", "two").wantErr(t, 2, "N is a number of instances")
	d.tend(t, "scale", "web").wantErr(t, 2, "accepts 2 arg")
}

func TestWaitNames(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "wait", "web:0", "--until", "running", "--timeout", "10s").want(t, 0, "")
	r := d.tend(t, "wait", "web", "--until", "running", "--timeout", "300ms")
	r.wantErr(t, 1, "timed out after 300ms waiting for web to be running: web:1 (backoff)")
	r = d.tend(t, "wait", "all", "--until", "idle", "--timeout", "300ms")
	r.wantErr(t, 1, "waiting for all to be idle: web:0 (running), web:1 (error)")
	d.tend(t, "wait", "nope", "--until", "running").wantErr(t, 3, "no such")

	// Every instance must get there: wait returns once the last one does.
	done := make(chan result, 1)
	go func() { done <- d.tend(t, "wait", "web", "--until", "running", "--timeout", "60s") }()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("wait web returned while web:1 is backing off: %+v", r)
	default:
	}
	d.tend(t, "start", "web:1").want(t, 0, "web:1 running pid 5001\n")
	(<-done).want(t, 0, "")
}
