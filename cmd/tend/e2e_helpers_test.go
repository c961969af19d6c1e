package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Helpers of the end-to-end tests that drive the real binary: a verb run
// to its end, gates that hold a run until the test opens them, the audit
// log read after the daemon stopped, and a notify flooder.

// tendRun runs `tend ARGS...` (the caller passes -c) to its end, at most
// two minutes, and returns its exit status, stdout and stderr.
func tendRun(t *testing.T, tend string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tend, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tend %s did not end in 2 minutes:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// background is a tend verb running while the test goes on.
type background struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// tendStart starts `tend ARGS...`; it is killed at the end of the test if
// it is still running.
func tendStart(t *testing.T, tend string, args ...string) *background {
	t.Helper()
	b := &background{done: make(chan struct{})}
	b.cmd = exec.Command(tend, args...)
	b.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.done
	})
	return b
}

// ended reports whether the verb has exited.
func (b *background) ended() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// wait waits (two minutes at most) for the verb to end and returns its exit
// status.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("tend %s did not end in 2 minutes", strings.Join(b.cmd.Args[1:], " "))
	}
	if ee, ok := b.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return 0
}

// gates is a directory of gate files: a run that waits for GATES/NAME holds
// until the test opens that gate.
type gates string

func newGates(t *testing.T) gates { return gates(t.TempDir()) }

func (g gates) open(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(g), name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openAll opens every gate in names, so that nothing waits for a turn when
// a failed test stops its daemon.
func (g gates) openAll(names ...string) {
	for _, n := range names {
		os.WriteFile(filepath.Join(string(g), n), nil, 0o600)
	}
}

// needSystemdNotify skips a test whose runs report with systemd-notify, the
// real sd_notify client, where it is missing (.ci/run installs systemd).
func needSystemdNotify(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-notify"); err != nil {
		testutil.Missing(t, "systemd-notify is missing (apt-get install systemd; .ci/run does)")
	}
}

// auditEvents reads every event of the audit log in stateDir, in order: what
// a daemon that has stopped said.
func auditEvents(t *testing.T, stateDir string) []program.Event {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stateDir, "audit", "events-*.jsonl"))
	sort.Strings(files)
	var out []program.Event
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var e program.Event
			if err := e.UnmarshalJSON(line); err != nil {
				t.Fatalf("%s: %v: %s", f, err, line)
			}
			out = append(out, e)
		}
	}
	return out
}

// find returns the events of kind for id ("" = any), in order.
func find(evs []program.Event, kind, id string) []program.Event {
	var out []program.Event
	for _, e := range evs {
		if e.Kind == kind && (id == "" || e.ID == id) {
			out = append(out, e)
		}
	}
	return out
}

// dump is evs one line each, for a failure message.
func dump(evs []program.Event) string {
	var b strings.Builder
	for _, e := range evs {
		j, _ := e.MarshalJSON()
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// eventsOf is the daemon's whole event log, for a failure message.
func eventsOf(c *client.Client) func() string {
	return func() string {
		evs, err := c.Events(0)
		if err != nil {
			return fmt.Sprintf("(no events: %v)", err)
		}
		return dump(evs)
	}
}

// flipMain is the test binary run as tend-flip: a notifier that flips its
// state in a tight loop, as fast as the daemon takes the datagrams.
// `tend-flip turn` alternates X_TEND_TURN=active and idle; `tend-flip
// reload`, RELOADING=1 and READY=1.
func flipMain() {
	msgs := map[string][2]string{
		"turn":   {"X_TEND_TURN=active", "X_TEND_TURN=idle"},
		"reload": {"RELOADING=1", "READY=1"},
	}[os.Args[1]]
	conn, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tend-flip:", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		if _, err := conn.Write([]byte(msgs[i%2])); err != nil && !isTransient(err) {
			fmt.Fprintln(os.Stderr, "tend-flip:", err)
			os.Exit(1)
		}
	}
}

// hogMain is the test binary run as tend-hog MiB: a process that is slow
// to die. It touches MiB mebibytes (the kernel frees them as it exits, which
// takes a while), ignores SIGTERM, and sleeps until killed.
func hogMain() {
	mib, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	signal.Ignore(syscall.SIGTERM)
	mem := make([]byte, mib<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	fmt.Println("hogging")
	for {
		time.Sleep(time.Hour)
		runtime.KeepAlive(mem)
	}
}

// isTransient reports a send error worth retrying (the daemon's queue full).
func isTransient(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOBUFS)
}

// helperBinary is this test binary under name, which TestMain runs as that
// helper (tend, tend-flip).
func helperBinary(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}
