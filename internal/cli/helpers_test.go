package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/client/ws"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// parts are the whole tend's attach (cmd/tend); no test here starts a
// daemon of its own through tend up.
var parts = Parts{
	Attach: ws.Attach,
	Screen: func(cols, rows int) Emulator { return cellScreen{vt.NewScreen(vt.Size{Cols: cols, Rows: rows})} },
}

// cellScreen is vt's screen resized in cells, as cmd/tend's.
type cellScreen struct{ *vt.Screen }

func (s cellScreen) Resize(cols, rows int) { s.Screen.Resize(vt.Size{Cols: cols, Rows: rows}) }

// fakeDaemon is an api.Server over fake state on a real unix socket.
type fakeDaemon struct {
	srv  *api.Server
	b    *apitest.Backend
	ev   *apitest.Events
	tt   *apitest.Terminals // no terminals until a test adds some
	sock string
	done chan struct{} // closed when ServeUnix returns
}

// shortDir is a temporary directory with a short path: a socket path must
// fit in 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tendcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	return startDaemonAt(t, filepath.Join(shortDir(t), "tend.sock"))
}

func startDaemonAt(t *testing.T, sock string) *fakeDaemon {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{b: apitest.NewBackend(t.TempDir()), ev: &apitest.Events{}, sock: sock, done: make(chan struct{})}
	d.tt = apitest.NewTerminals(d.b)
	d.srv = api.New(d.b, d.ev, api.Options{Version: "test", Terminals: d.tt})
	go func() {
		if err := d.srv.ServeUnix(sock); err != nil {
			t.Errorf("ServeUnix: %v", err)
		}
		close(d.done)
	}()
	t.Cleanup(func() {
		d.srv.Close()
		<-d.done
	})
	c := client.New(sock)
	testutil.Eventually(t, "the daemon", func() bool { _, err := c.Health(); return err == nil })
	return d
}

// result is one run of Main.
type result struct {
	code           int
	stdout, stderr string
}

// tend runs the CLI with --socket pointing at d.
func (d *fakeDaemon) tend(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--socket", d.sock}, args...)...)
}

// run runs the CLI as is.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(t.Context(), parts, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// runBackground runs the CLI until its context is cancelled; wait returns
// its exit status.
func (d *fakeDaemon) runBackground(t *testing.T, args ...string) (out *testutil.Buffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out = &testutil.Buffer{}
	var errb testutil.Buffer
	code := make(chan int, 1)
	go func() { code <- Main(ctx, parts, append([]string{"--socket", d.sock}, args...), out, &errb) }()
	return out, func() int {
		cancel()
		c := <-code
		if errb.String() != "" {
			t.Logf("stderr: %s", errb.String())
		}
		return c
	}
}

func (r result) want(t *testing.T, code int, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s", r.code, r.stdout, r.stderr, code, stdout)
	}
}

// wantErr checks a failure: its exit status and a one-line stderr.
func (r result) wantErr(t *testing.T, code int, contains string) {
	t.Helper()
	if r.code != code || !strings.HasPrefix(r.stderr, "tend: ") || !strings.Contains(r.stderr, contains) ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit %d and one line \"tend: ...%s...\"", r.code, r.stderr, code, contains)
	}
}

func intp(n int) *int { return &n }

// fleet puts three instances in d: an agent, a healthy worker and a worker
// backing off.
func (d *fakeDaemon) fleet() {
	d.b.Put(program.Status{
		ID: "planner:0", Program: "planner", Agent: true, State: "running", Lifecycle: "idle",
		PID: intp(4242), Run: 3, UptimeMS: 81234, Ready: true, RSSBytes: 73400320,
		Restarts: program.Restarts{Crash: 1, RSSWatchdog: 1},
		Why:      "up 1m21s; 1 crash and 1 memory drain since start", Tracking: "group",
	})
	d.b.Put(program.Status{
		ID: "web:0", Program: "web", State: "running", Lifecycle: "running",
		PID: intp(100), Run: 1, UptimeMS: 5000, Ready: true, Why: "up 5s", Tracking: "group",
	})
	d.b.Put(program.Status{
		ID: "web:1", Program: "web", Instance: 1, State: "backoff", Lifecycle: "error",
		Run: 4, CrashCount: 4, Restarts: program.Restarts{Crash: 3, CleanExit: 1},
		LastExit: &program.LastExit{Code: intp(1), LikelyCause: "runtime_error"},
		Why:      "backing off 8s after crash 4 of 5: exit 1 (runtime_error)", Tracking: "none",
	})
}
