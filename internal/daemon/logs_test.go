package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// startDaemonOut is startDaemon with the daemon's stdout (forward_output)
// going to out.
func startDaemonOut(t *testing.T, dir, config string, out io.Writer) *client.Client {
	t.Helper()
	path := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: path, Stderr: io.Discard, Stdout: out}) }()
	c := client.New(filepath.Join(dir, ".tend", SocketName))
	testutil.Eventually(t, "the daemon to answer", func() bool {
		select {
		case err := <-done:
			t.Fatalf("daemon: %v", err)
		default:
		}
		_, err := c.Health()
		return err == nil
	})
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("daemon did not stop")
		}
		if kids := children(); len(kids) != 0 {
			t.Errorf("processes left after the daemon stopped: %v", kids)
		}
	})
	return c
}

// logsOf is what GET /v1/logs/sel answers now.
func logsOf(t *testing.T, c *client.Client, sel string, o client.LogOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.Logs(context.Background(), sel, o, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// stepper runs each step file $STEPS/K-N in turn: "out LINE" or "err
// LINE" for that stream. The test writes a step and waits for its line, so
// the order the lines were written in is known.
const stepper = `i=0; while :; do f="$STEPS/$TEND_INSTANCE-$i"; while [ ! -e "$f" ]; do sleep 0.01; done; read s l < "$f"; if [ "$s" = out ]; then echo "$l"; else echo "$l" >&2; fi; i=$((i+1)); done`

// Two instances writing stdout and stderr in turn, through a real daemon:
// GET /v1/logs/NAME merges them in time order, each line with its
// instance and stream.
func TestLogsOfTwoInstancesMergeInTimeOrder(t *testing.T) {
	dir := t.TempDir()
	steps := filepath.Join(dir, "steps")
	os.Mkdir(steps, 0o755)
	c := startDaemonOut(t, dir, fmt.Sprintf("[program.duo]\ninstances = 2\nstop_grace = \"2s\"\nshell = '%s'\nenv = { STEPS = %q }\n", stepper, steps), io.Discard)
	type step struct{ k, stream, line string }
	plan := []step{{"0", "out", "a1"}, {"1", "err", "b1"}, {"0", "err", "a2"}, {"1", "out", "b2"}, {"1", "err", "b3"}, {"0", "out", "a3"}, {"0", "err", "a4"}, {"1", "out", "b4"}}
	next := map[string]int{}
	for _, s := range plan {
		name := filepath.Join(steps, s.k+"-"+strconv.Itoa(next[s.k]))
		next[s.k]++
		os.WriteFile(name+".tmp", []byte(s.stream+" "+s.line+"\n"), 0o644)
		os.Rename(name+".tmp", name) // whole, or not there
		testutil.Eventually(t, s.line+" in the log", func() bool {
			return strings.Contains(logsOf(t, c, "duo:"+s.k, client.LogOptions{Tail: -1}), s.line+"\n")
		})
		time.Sleep(3 * time.Millisecond) // the next line gets a later millisecond
	}

	var want, got []string
	for _, s := range plan {
		stream := map[string]string{"out": "stdout", "err": "stderr"}[s.stream]
		want = append(want, "duo:"+s.k+" "+stream+" "+s.line)
	}
	body := logsOf(t, c, "duo", client.LogOptions{Tail: -1, JSON: true})
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		var l struct{ TS, ID, Stream, Line string }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.TS == "" {
			t.Fatalf("not a JSON line with a time: %q (%v)", line, err)
		}
		got = append(got, l.ID+" "+l.Stream+" "+l.Line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("merged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	text := logsOf(t, c, "duo", client.LogOptions{Tail: 2})
	if text != "duo:0 | a4\nduo:1 | b4\n" {
		t.Errorf("text tail: %q", text)
	}
	if text := logsOf(t, c, "all", client.LogOptions{Tail: -1, Stderr: true}); text != "duo:1 | b1\nduo:0 | a2\nduo:1 | b3\nduo:0 | a4\n" {
		t.Errorf("stderr only: %q", text)
	}
}

// forward_output prints every captured line on the daemon's stdout as
// NAME:K | line.
func TestForwardOutput(t *testing.T) {
	dir := t.TempDir()
	var out testutil.Buffer
	startDaemonOut(t, dir, "[daemon]\nforward_output = true\n[program.fw]\ninstances = 2\nstop_grace = \"2s\"\nshell = 'echo hello from $TEND_INSTANCE; echo oops >&2; exec sleep 1000'\n", &out)
	for _, want := range []string{"fw:0 | hello from 0\n", "fw:1 | hello from 1\n", "fw:0 | oops\n", "fw:1 | oops\n"} {
		testutil.Eventually(t, want+" on stdout", func() bool { return strings.Contains(out.String(), want) })
	}
}

// A follower sees every line, in order, while the log rotates at 4 KiB
// many times over; no file is ever larger than that.
func TestFollowAcrossRotationThroughTheAPI(t *testing.T) {
	dir := t.TempDir()
	trigger := filepath.Join(dir, "go")
	c := startDaemonOut(t, dir, fmt.Sprintf(`[program.pour]
stop_grace = "2s"
shell = 'echo ready; while [ ! -e %q ]; do sleep 0.01; done; i=0; while [ $i -lt 3000 ]; do echo "seq $i"; i=$((i+1)); done; exec sleep 1000'
[program.pour.logs]
max_size = 4096
max_files = 30
`, trigger), io.Discard)
	testutil.Eventually(t, "ready", func() bool { return logsOf(t, c, "pour", client.LogOptions{Tail: -1}) == "ready\n" })
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.Buffer
	followed := make(chan error, 1)
	go func() { followed <- c.Logs(ctx, "pour:0", client.LogOptions{Tail: 1, Follow: true}, &out) }()
	defer func() {
		cancel()
		<-followed
	}()
	testutil.Eventually(t, "the follow to start", func() bool { return out.String() == "ready\n" })
	os.WriteFile(trigger, nil, 0o644)
	testutil.Eventually(t, "the last line followed", func() bool { return strings.Contains(out.String(), "seq 2999\n") })
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3001 {
		t.Fatalf("%d lines followed, want 3001", len(lines))
	}
	for i, l := range lines[1:] {
		if l != "seq "+strconv.Itoa(i) {
			t.Fatalf("line %d is %q", i+1, l)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, ".tend", "logs", "pour-0.log*"))
	if len(logs) < 5 {
		t.Errorf("only %d log files: expected many rotations", len(logs))
	}
	for _, p := range logs {
		fi, err := os.Stat(p)
		if err == nil && (fi.Size() > 4096 || !strings.HasSuffix(p, ".log") && fi.Size() != 4096) {
			t.Errorf("%s is %d bytes: logs rotate at exactly max_size", p, fi.Size())
		}
	}
	// tend logs reads every record kept whole, those split across two
	// files included.
	tail := strings.Split(strings.TrimSuffix(logsOf(t, c, "pour", client.LogOptions{Tail: -1}), "\n"), "\n")
	if tail[0] == "ready" {
		tail = tail[1:]
	}
	first, err := strconv.Atoi(strings.TrimPrefix(tail[0], "seq "))
	if err != nil || len(tail) != 3000-first {
		t.Fatalf("tend logs: %d lines from %q", len(tail), tail[0])
	}
	for i, l := range tail {
		if l != "seq "+strconv.Itoa(first+i) {
			t.Fatalf("tend logs line %d is %q", i, l)
		}
	}
}

// Adding and removing a program a hundred times leaves no goroutine
// behind (lumberjack left one per log it ever opened).
func TestNoGoroutineLeftAfterAddRemoveCycles(t *testing.T) {
	dir := t.TempDir()
	c := startDaemonOut(t, dir, "[daemon]\n", io.Discard)
	cycle := func(i int) {
		t.Helper()
		if _, err := c.Add(map[string]any{"name": "cyc", "shell": "echo hello " + strconv.Itoa(i) + "; echo err >&2; exec sleep 1000", "stop_grace": "2s"}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the cycle's output", func() bool {
			return strings.Contains(logsOf(t, c, "cyc:0", client.LogOptions{Tail: 2}), "hello "+strconv.Itoa(i)+"\n")
		})
		if err := c.Remove("cyc", program.RemoveOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // warm up: the shared loop, the writers, the connections
		cycle(i)
	}
	base := runtime.NumGoroutine()
	for i := 3; i < 103; i++ {
		cycle(i)
	}
	testutil.Eventually(t, "the goroutines of 100 add/rm cycles to end", func() bool { return runtime.NumGoroutine() <= base+2 },
		testutil.Explain(func() string {
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			return fmt.Sprintf("%d goroutines after 100 add/rm cycles, %d before:\n%s", runtime.NumGoroutine(), base, b.String())
		}))
	if names, _ := os.ReadDir(filepath.Join(dir, ".tend", "fifo")); len(names) != 0 {
		t.Errorf("FIFOs left in the state dir: %v", names)
	}
}

// A follower of an instance that is replaced (removed and added again, as
// a reload that changes a program does) goes on with the new one's lines.
func TestFollowOutlivesAReplacedInstance(t *testing.T) {
	dir := t.TempDir()
	c := startDaemonOut(t, dir, "[daemon]\n", io.Discard)
	add := func(word string) {
		t.Helper()
		if _, err := c.Add(map[string]any{"name": "re", "shell": "echo " + word + "; exec sleep 1000", "stop_grace": "2s"}); err != nil {
			t.Fatal(err)
		}
	}
	add("first")
	testutil.Eventually(t, "the first run's line", func() bool { return logsOf(t, c, "re:0", client.LogOptions{Tail: -1}) == "first\n" })
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.Buffer
	followed := make(chan error, 1)
	go func() { followed <- c.Logs(ctx, "re", client.LogOptions{Tail: 1, Follow: true}, &out) }()
	defer func() {
		cancel()
		<-followed
	}()
	testutil.Eventually(t, "the follow to start", func() bool { return out.String() == "first\n" })
	if err := c.Remove("re", program.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	add("second")
	testutil.Eventually(t, "the new instance's line", func() bool { return out.String() == "first\nsecond\n" })
}
