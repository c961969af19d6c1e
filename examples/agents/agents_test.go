// Package agents holds no code: its test runs each example of
// examples/agents under a real tend daemon, as its README says to.
package agents

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// fleet is a tend up running one example in a copy of examples/agents.
type fleet struct {
	dir string // the example's directory in the copy
	c   *client.Client
}

// up copies examples/agents into a short temporary directory (socket paths
// must fit in 108 bytes), applies edits to the example's tend.toml (old,
// new pairs), and runs tend up there with tend on PATH.
func up(t *testing.T, example string, edits ...string) *fleet {
	t.Helper()
	testutil.NeedTool(t, "python3")
	bin := testutil.TendBinary(t)
	root, err := os.MkdirTemp("", "tendex")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.CopyFS(root, os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	f := &fleet{dir: filepath.Join(root, example)}
	conf := filepath.Join(f.dir, "tend.toml")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if !bytes.Contains(b, []byte(edits[i])) {
			t.Fatalf("%s has no %q", conf, edits[i])
		}
		b = bytes.ReplaceAll(b, []byte(edits[i]), []byte(edits[i+1]))
	}
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var out testutil.Buffer
	cmd := exec.Command(bin, "up")
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "GORACE=atexit_sleep_ms=10")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		down := exec.Command(bin, "down")
		down.Dir = f.dir
		down.Run()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Error("tend up did not stop on tend down")
		}
		if t.Failed() {
			t.Logf("tend up said:\n%s", out.String())
		}
	})
	f.c = client.New(filepath.Join(f.dir, ".tend", "tend.sock"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := f.c.Health(); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("tend up ended:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tend up did not serve in 30s:\n%s", out.String())
		}
	}
	return f
}

// needTerminals waits for id to run and fails when the daemon serves no terminals (its
// screen route answers 501).
func (f *fleet) needTerminals(t *testing.T, id string) {
	t.Helper()
	var apiErr *client.APIError
	testutil.Eventually(t, id+" to run", func() bool {
		st, err := f.c.Status(id)
		return err == nil && st.State == program.StateRunning
	})
	if _, err := f.c.Screen(id, false); errors.As(err, &apiErr) && apiErr.Status == 501 {
		t.Fatalf("the daemon serves no terminals: %v", err)
	}
}

// screenShows waits until id's screen shows want.
func (f *fleet) screenShows(t *testing.T, id, want string) {
	t.Helper()
	var last []string
	testutil.Eventually(t, "the screen of "+id+" to show "+want, func() bool {
		scr, err := f.c.Screen(id, false)
		last = scr.Lines
		return err == nil && strings.Contains(strings.Join(scr.Lines, "\n"), want)
	}, testutil.Explain(func() string { return strings.Join(last, "\n") }))
}

// turns waits for n turns of id to have begun and ended, by its
// status_changed events.
func (f *fleet) turns(t *testing.T, id string, n int) {
	t.Helper()
	count := func() int {
		evs, err := f.c.EventsMatching(0, client.EventFilter{Kinds: []string{program.KindStatusChanged}, ID: id})
		if err != nil {
			return 0
		}
		ended, in := 0, false
		for _, e := range evs {
			st, ok := e.Data.(*program.Status)
			if !ok {
				continue
			}
			if in && !st.TurnActive {
				ended++
			}
			in = st.TurnActive
		}
		return ended
	}
	testutil.Eventually(t, "turns of "+id+" to end", func() bool { return count() >= n })
}

func send(t *testing.T, f *fleet, id, text string) {
	t.Helper()
	if _, err := f.c.Input(id, program.Input{Text: text, Enter: true}); err != nil {
		t.Fatal(err)
	}
}

// TestCodingAgentHooks: the fake agent's UserPromptSubmit and Stop hooks
// (tend notify --turn active / idle) report its turns. turn_idle_after is
// an hour, so a turn that ends sooner was ended by the Stop hook.
func TestCodingAgentHooks(t *testing.T) {
	f := up(t, "coding-agent", `turn_idle_after = "30s"`, `turn_idle_after = "1h"`, `turn_grace = "2m"`, `turn_grace = "0s"`)
	f.needTerminals(t, "coder:0")
	f.screenShows(t, "coder:0", "\n>")
	send(t, f, "coder", "fix the failing test")
	testutil.Eventually(t, "the prompt-submit hook to start a turn", func() bool {
		st, err := f.c.Status("coder:0")
		return err == nil && st.TurnActive && st.Lifecycle == program.LifecycleRunning
	})
	f.screenShows(t, "coder:0", "✓ done: fix the failing test")
	f.turns(t, "coder:0", 1)
	st, err := f.c.Status("coder:0")
	if err != nil || st.TurnActive || st.Lifecycle != program.LifecycleIdle {
		t.Errorf("after the stop hook: %+v, %v; want idle", st, err)
	}
}

// TestAfterTurn: after-turn.py runs its command once per turn of the agent.
func TestAfterTurn(t *testing.T) {
	f := up(t, "after-turn", `turn_idle_after = "30s"`, `turn_idle_after = "1h"`)
	f.needTerminals(t, "coder:0")
	testutil.Eventually(t, "after-turn to run", func() bool {
		st, err := f.c.Status("after-turn:0")
		return err == nil && st.State == program.StateRunning
	})
	f.screenShows(t, "coder:0", "\n>")
	log := filepath.Join(f.dir, "turns.log")
	lines := func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(strings.ReplaceAll(string(b), " finished a turn", "|"))
	}
	for n, task := range []string{"add a test", "make it pass"} {
		send(t, f, "coder:0", task)
		testutil.Eventually(t, "turns.log to have a line for the turn", func() bool {
			return strings.Count(strings.Join(lines(), " "), "coder:0|") == n+1
		}, testutil.Explain(func() string { b, _ := os.ReadFile(log); return string(b) }))
	}
	time.Sleep(500 * time.Millisecond) // no turn is counted twice
	if b, _ := os.ReadFile(log); strings.Count(string(b), "\n") != 2 {
		t.Errorf("turns.log after two turns:\n%s", b)
	}
}

// TestREPL: python3 -i as a terminal agent, whose turns come from its
// screen.
func TestREPL(t *testing.T) {
	f := up(t, "repl")
	f.needTerminals(t, "repl:0")
	f.screenShows(t, "repl:0", ">>>")
	send(t, f, "repl", "print(6 * 7)")
	f.screenShows(t, "repl:0", "42\n>>>")
	f.turns(t, "repl:0", 1)
	testutil.Eventually(t, "repl:0 idle", func() bool {
		st, err := f.c.Status("repl:0")
		return err == nil && st.Lifecycle == program.LifecycleIdle && !st.TurnActive
	})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.TendBinary(t), "screen", "repl:0")
	cmd.Dir, cmd.Stdout = f.dir, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), ">>> print(6 * 7)\n42\n>>>") {
		t.Errorf("tend screen repl:0: %v\n%s", err, out.String())
	}
}
