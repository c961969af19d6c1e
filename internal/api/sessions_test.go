package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// sessionFixture is the fixture with two sessions' agents besides web and
// planner: s1a and s1b (session s-1, owner ana and bob), s2a (session s-2).
func sessionFixture(t *testing.T) *fixture {
	f := newFixture(t)
	pid := 7000
	for _, p := range []struct {
		name   string
		labels map[string]string
	}{
		{"s1a", map[string]string{"session": "s-1", "owner": "ana"}},
		{"s1b", map[string]string{"session": "s-1", "owner": "bob"}},
		{"s2a", map[string]string{"session": "s-2", "owner": "ana"}},
	} {
		f.b.Put(program.Status{ID: p.name + ":0", Program: p.name, Labels: p.labels, State: program.StateRunning,
			Lifecycle: program.LifecycleRunning, PID: &pid, Tracking: program.TrackingGroup})
	}
	return f
}

func ids(sts []program.Status) string {
	var out []string
	for _, st := range sts {
		out = append(out, st.ID)
	}
	return strings.Join(out, ",")
}

func TestStatusByLabel(t *testing.T) {
	f := sessionFixture(t)
	for _, tc := range []struct{ path, want string }{
		{"/v1/status?label=session=s-1", "s1a:0,s1b:0"},
		{"/v1/status?label=session=s-1&label=owner=ana", "s1a:0"}, // all must match
		{"/v1/status?label=owner=ana", "s1a:0,s2a:0"},
		{"/v1/status?label=session=s-9", ""},
		{"/v1/status/all?label=session=s-2", "s2a:0"},
		{"/v1/status/s1a?label=session=s-1", "s1a:0"},
		{"/v1/status/s1a:0?label=session=s-1", "s1a:0"}, // with labels an instance id answers a list too
		{"/v1/status/s1a:0?label=session=s-2", ""},
	} {
		code, body := f.do(t, "GET", tc.path, "")
		if code != 200 {
			t.Errorf("%s: %d %s", tc.path, code, body)
			continue
		}
		if got := ids(decode[[]program.Status](t, body)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
	}
	// A status carries its labels.
	_, body := f.do(t, "GET", "/v1/status/s1b:0", "")
	if st := decode[program.Status](t, body); st.Labels["owner"] != "bob" {
		t.Errorf("labels of s1b:0: %v", st.Labels)
	}
	// The table view filters too, and shows a LABELS column when asked.
	_, table := f.do(t, "GET", "/v1/status?view=table&label=session=s-1&show_labels=1", "")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LABELS") || !strings.Contains(lines[1], "owner=ana,session=s-1") {
		t.Errorf("table:\n%s", table)
	}
}

// Every route that takes ?label= refuses a malformed one with a 400 that
// names it.
func TestBadLabelParams(t *testing.T) {
	f := sessionFixture(t)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/v1/status?label=session", `\"session\": want KEY=VALUE`},
		{"GET", "/v1/status/all?label=Session=x", `label key \"Session\"`},
		{"GET", "/v1/events?label=session&format=json", `want KEY=VALUE`},
		{"GET", "/v1/logs/all?label==x", `label key \"\"`},
		{"POST", "/v1/programs/all/stop?label=x", `\"x\": want KEY=VALUE`},
		{"DELETE", "/v1/programs?label=a%20b=1", `label key \"a b\"`},
		{"DELETE", "/v1/programs", "add ?label=KEY=VALUE"},
		{"GET", "/v1/status?label=k=" + strings.Repeat("v", 257), "257 characters"},
	} {
		code, body := f.do(t, tc.method, tc.path, "")
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want 400 with %s", tc.method, tc.path, code, body, tc.want)
		}
	}
	if calls := f.b.Calls(); len(calls) != 0 {
		t.Errorf("bad requests acted: %v", calls)
	}
}

func TestActAndRemoveByLabel(t *testing.T) {
	f := sessionFixture(t)
	code, body := f.do(t, "POST", "/v1/programs/all/stop?label=session=s-1", "")
	if code != 200 || decode[program.ActResult](t, body).IDs == nil || strings.Join(decode[program.ActResult](t, body).IDs, ",") != "s1a:0,s1b:0" {
		t.Errorf("stop by label: %d %s", code, body)
	}
	// Nothing matches: nothing done, and no error.
	code, body = f.do(t, "POST", "/v1/programs/web/restart?label=session=s-1", "")
	if code != 200 || !strings.Contains(body, `"ids":[]`) {
		t.Errorf("restart of web by a label it lacks: %d %s", code, body)
	}
	code, body = f.do(t, "DELETE", "/v1/programs?label=owner=ana", "")
	if code != 200 || strings.TrimSpace(body) != `{"removed":["s1a","s2a"]}` {
		t.Errorf("DELETE by label: %d %s", code, body)
	}
	code, body = f.do(t, "DELETE", "/v1/programs/s1b?label=session=s-2", "")
	if code != 200 || strings.TrimSpace(body) != `{"removed":[]}` {
		t.Errorf("DELETE of a program its label does not match: %d %s", code, body)
	}
	code, body = f.do(t, "DELETE", "/v1/programs/s1b?label=session=s-1", "")
	if code != 200 || strings.TrimSpace(body) != `{"removed":["s1b"]}` {
		t.Errorf("DELETE of a program its label matches: %d %s", code, body)
	}
	code, _ = f.do(t, "DELETE", "/v1/programs/nope?label=session=s-1", "")
	if code != 404 {
		t.Errorf("DELETE of an unknown program by label: %d, want 404", code)
	}
	want := []string{"stop all?label=session=s-1", "restart web?label=session=s-1", "remove s1a", "remove s2a", "remove s1b"}
	if got := f.b.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

func TestLogsByLabel(t *testing.T) {
	f := sessionFixture(t)
	ts := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	record(t, f, "s1a:0", ts, logfile.Stdout, "from a")
	record(t, f, "s1b:0", ts.Add(time.Second), logfile.Stdout, "from b")
	record(t, f, "s2a:0", ts.Add(2*time.Second), logfile.Stdout, "from s2")
	_, body := f.do(t, "GET", "/v1/logs/all?label=session=s-1", "")
	if body != "s1a:0 | from a\ns1b:0 | from b\n" {
		t.Errorf("logs of session s-1:\n%s", body)
	}
}

// ?label= on the event stream: the events of the instances of matching
// programs, status_changed by the labels its status carries; events of no
// instance (daemon, tracked_changed) are left out.
func TestEventsByLabel(t *testing.T) {
	f := sessionFixture(t)
	s1 := map[string]string{"session": "s-1"}
	f.ev.Publish(program.KindDaemon, "", &program.DaemonPhase{Phase: program.PhaseStarted})
	f.ev.PublishLabelled(program.KindSpawned, "s1a:0", s1, &program.Spawned{PID: 1, Run: 1})
	f.ev.PublishLabelled(program.KindSpawned, "s2a:0", map[string]string{"session": "s-2"}, &program.Spawned{PID: 2, Run: 1})
	f.ev.Publish(program.KindStatusChanged, "", &program.Status{ID: "s1b:0", Program: "s1b", Labels: s1, State: program.StateRunning})
	f.ev.Publish(program.KindTrackedChanged, "", &program.TrackedChanged{Added: []string{"s1a:0"}, Removed: []string{}, Count: 1})
	f.ev.Publish(program.KindSpawned, "web:0", &program.Spawned{PID: 3, Run: 1})
	_, body := f.do(t, "GET", "/v1/events?label=session=s-1", "", "Accept", "application/json")
	var got []string
	for _, e := range decode[[]program.Event](t, body) {
		got = append(got, e.Kind)
	}
	if strings.Join(got, ",") != "spawned,status_changed" {
		t.Errorf("events of session s-1: %v\n%s", got, body)
	}
	// Live too: the stream sends the backlog's matches, then new ones.
	req, _ := http.NewRequest("GET", f.url+"/v1/events?label=session=s-1", nil)
	s := openStream(t, f.hc, req)
	s.waitFor(t, `"s1a:0"`)
	f.ev.PublishLabelled(program.KindExited, "s1a:0", s1, &program.Exited{PID: 1, LikelyCause: program.CauseCleanExit})
	s.waitFor(t, "event: exited")
}

func TestAddWithoutNameAndLabels(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/v1/programs", `{"command":["true"],"labels":{"session":"s-7"},"remove_on_exit":true}`)
	if code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	a := decode[program.Added](t, body)
	if len(a.Name) != len("run-12345678") || !strings.HasPrefix(a.Name, "run-") || !slices.Equal(a.IDs, []string{a.Name + ":0"}) {
		t.Fatalf("answer %s: want a generated run-XXXXXXXX name and its ids", body)
	}
	// What is kept names the program: it comes back under its name.
	kept := decode[map[string]any](t, string(f.b.Added(a.Name)))
	if kept["name"] != a.Name || kept["remove_on_exit"] != true {
		t.Errorf("kept body %s", f.b.Added(a.Name))
	}
	_, body = f.do(t, "GET", "/v1/status?label=session=s-7", "")
	if got := ids(decode[[]program.Status](t, body)); got != a.Name+":0" {
		t.Errorf("the new program by its label: %q", got)
	}
	// A body whose name is null is named too; an empty object gets a name and
	// is judged as any body without a command.
	code, body = f.do(t, "POST", "/v1/programs", `{"name": null, "command":["true"]}`)
	if code != 201 || !strings.Contains(body, `"name":"run-`) {
		t.Errorf("name null: %d %s", code, body)
	}
	code, body = f.do(t, "POST", "/v1/programs", `{}`)
	if code != 400 || !strings.Contains(body, "command") {
		t.Errorf("empty body: %d %s", code, body)
	}
}

// POST /v1/programs?attach=1 adds, then answers the run's output and its
// end as JSON lines; the logs stay held until the answer is done.
func TestAddAttached(t *testing.T) {
	f := newFixture(t)
	resp, err := f.hc.Post(f.url+"/v1/programs?attach=1", "application/json",
		strings.NewReader(`{"name":"job","command":["sh","-c","exit 3"],"remove_on_exit":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("attach: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line")
		}
		return ""
	}
	if got := next(); got != `{"name":"job","ids":["job:0"]}` {
		t.Fatalf("first line %s", got)
	}
	if f.b.Holds("job") != 1 {
		t.Errorf("holds while attached: %d, want 1", f.b.Holds("job"))
	}
	// The test plays the daemon: the run writes, then ends with exit 3.
	now := time.Now()
	record(t, f, "job:0", now, logfile.Stdout, "working")
	record(t, f, "job:0", now, logfile.Stderr, "failed")
	f.ev.Publish(program.KindSpawned, "job:0", &program.Spawned{PID: 9, Run: 1})
	code := 3
	f.ev.Publish(program.KindExited, "job:0", &program.Exited{PID: 9, Code: &code, LikelyCause: program.CauseRuntimeError})
	out := []string{next(), next()}
	// remove_on_exit: the answer ends once the daemon has removed it.
	select {
	case l := <-lines:
		t.Fatalf("a line before the removal: %s", l)
	case <-time.After(100 * time.Millisecond):
	}
	if err := f.b.Remove(t.Context(), "job", program.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		out = append(out, l)
	}
	if len(out) != 3 || !strings.Contains(out[0], `"stream":"stdout","line":"working"`) || !strings.Contains(out[1], `"stream":"stderr","line":"failed"`) {
		t.Fatalf("output lines %q", out)
	}
	var end struct {
		Exit program.RunEnd `json:"exit"`
	}
	if err := json.Unmarshal([]byte(out[2]), &end); err != nil || end.Exit.Status != 3 || end.Exit.LikelyCause != program.CauseRuntimeError {
		t.Errorf("last line %s (%v)", out[2], err)
	}
	testutil.Eventually(t, "the hold to go", func() bool { return f.b.Holds("job") == 0 })

	// A run that never launched: spawn_failed, then exited with no code: 127.
	resp2, err := f.hc.Post(f.url+"/v1/programs?attach=1", "application/json", strings.NewReader(`{"name":"gone","command":["/nonexistent"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	sc := bufio.NewScanner(resp2.Body)
	sc.Scan()
	f.ev.Publish(program.KindSpawnFailed, "gone:0", &program.SpawnFailed{Error: "fork/exec /nonexistent: no such file or directory", Errno: "ENOENT"})
	f.ev.Publish(program.KindExited, "gone:0", &program.Exited{LikelyCause: program.CauseSpawnFailed})
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	if !strings.Contains(last, `"spawn_error":"fork/exec /nonexistent: no such file or directory"`) || !strings.Contains(last, `"status":127`) {
		t.Errorf("spawn failure's last line %s", last)
	}

	// Attach follows one run: more instances, or none started, are refused.
	c, body := f.do(t, "POST", "/v1/programs?attach=1", `{"name":"two","command":["true"],"instances":2}`)
	if c != 400 || !strings.Contains(body, "instances must be 1") {
		t.Errorf("attach of two instances: %d %s", c, body)
	}
	c, body = f.do(t, "POST", "/v1/programs?attach=1", `{"name":"web","command":["true"]}`)
	if c != 409 || f.b.Holds("web") != 0 {
		t.Errorf("attach of a name taken: %d %s, holds %d", c, body, f.b.Holds("web"))
	}
}

func TestSignalRoute(t *testing.T) {
	f := sessionFixture(t)
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/programs/s1a/signal", `{"signal":"INT"}`, 200, `{"ids":["s1a:0"]}`},
		{"/v1/programs/all/signal?label=session=s-2", `{"signal":15}`, 200, `{"ids":["s2a:0"]}`},
		{"/v1/programs/s1a/signal", `{"signal":"NOPE"}`, 400, "want a name"},
		{"/v1/programs/s1a/signal", `{}`, 400, `body must be`},
		{"/v1/programs/nope/signal", `{"signal":"INT"}`, 404, "nope"},
	} {
		code, body := f.do(t, "POST", tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	f.do(t, "POST", "/v1/programs/s1b/stop", "")
	if code, body := f.do(t, "POST", "/v1/programs/s1b/signal", `{"signal":"INT"}`); code != 409 {
		t.Errorf("signal to a stopped instance: %d %s, want 409", code, body)
	}
	want := []string{"signal SIGINT s1a:0", "signal SIGTERM s2a:0", "stop s1b"}
	if got := f.b.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}
