package acp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// exampleAgent builds the SDK's own example agent (no AI model: it streams
// text and two tool calls, asks permission with allow and reject, and
// honours cancel) from the module cache.
func exampleAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example agent: %v\n%s", err, out)
	}
	return bin
}

type recorder struct {
	mu     sync.Mutex
	events []Event
	text   strings.Builder
	ch     chan Event
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		Event: func(e Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			r.ch <- e
		},
		Text: func(p []byte) { r.mu.Lock(); r.text.Write(p); r.mu.Unlock() },
	}
}

func (r *recorder) wait(t *testing.T, k EventKind) Event {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-r.ch:
			if e.Kind == k {
				return e
			}
		case <-deadline:
			t.Fatalf("no event %d in 60s", k)
		}
	}
}

func startAgent(t *testing.T, bin string, opts Options) (*Conn, *recorder) {
	t.Helper()
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &recorder{ch: make(chan Event, 100)}
	opts.Hooks = r.hooks()
	c := Start(stdin, stdout, opts)
	t.Cleanup(func() {
		c.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c, r
}

// A prompt to the SDK's example agent: the permission it asks is put to
// the operator and approved, the answer streams, the turn ends end_turn.
func TestConnExampleAgent(t *testing.T) {
	bin := exampleAgent(t)
	wd, _ := os.Getwd()
	c, r := startAgent(t, bin, Options{Cwd: wd, IDBase: 1 << 40})
	if e := r.wait(t, EventReady); e.SessionID == "" {
		t.Fatalf("ready without a session: %+v", e)
	}
	turn, err := c.Prompt("hello", true)
	if err != nil {
		t.Fatal(err)
	}
	asked := r.wait(t, EventAsked)
	if asked.Waiting.Title == "" || len(asked.Waiting.Options) != 2 {
		t.Fatalf("asked: %+v", asked.Waiting)
	}
	if _, err := c.Answer(asked.Waiting.RequestID, "nope", false); err == nil {
		t.Fatal("an unknown option was taken")
	}
	if rep := c.Report(); rep.Waiting == nil || rep.Waiting.RequestID != asked.Waiting.RequestID {
		t.Fatalf("after a bad answer the request is not open: %+v", rep.Waiting)
	}
	if _, id, err := c.Approve("", ""); err != nil || id != "allow" {
		t.Fatalf("approve: %q %v", id, err)
	}
	var answer strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		ups, stop, err := turn.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ups {
			answer.WriteString(u.Text)
		}
		if stop != "" {
			if stop != program.StopEndTurn {
				t.Fatalf("stop reason %q", stop)
			}
			break
		}
	}
	if !strings.Contains(answer.String(), "Perfect!") || !strings.Contains(answer.String(), "[tool] ") {
		t.Errorf("answer:\n%s", answer.String())
	}
	ended := r.wait(t, EventTurnEnded)
	if ended.PromptID != turn.ID || ended.StopReason != program.StopEndTurn {
		t.Errorf("ended: %+v", ended)
	}
	r.mu.Lock()
	text := r.text.String()
	r.mu.Unlock()
	for _, want := range []string{"> hello\n", "[tool] ", "[permission] ", "Perfect!"} {
		if !strings.Contains(text, want) {
			t.Errorf("transcript lacks %q:\n%s", want, text)
		}
	}
}

// Cancel mid-turn, while the agent streams (its permission answered by
// the allow policy): the turn ends cancelled. (The example agent ends a
// turn whose permission request was answered cancelled with end_turn.)
func TestConnCancel(t *testing.T) {
	bin := exampleAgent(t)
	wd, _ := os.Getwd()
	c, r := startAgent(t, bin, Options{Cwd: wd, Permission: program.PermissionAllow})
	r.wait(t, EventReady)
	turn, _ := c.Prompt("hello", true)
	// Once it streams: a session/cancel that comes before the example
	// agent has begun its turn is lost on it.
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	if _, _, err := turn.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(); err != nil {
		t.Fatal(err)
	}
	if e := r.wait(t, EventTurnEnded); e.StopReason != program.StopCancelled || e.PromptID != turn.ID {
		t.Errorf("ended: %+v", e)
	}
}

// Cancel while a permission request is open: the request is answered
// cancelled, and that answer is told before the turn's end.
func TestConnCancelOpenRequest(t *testing.T) {
	bin := exampleAgent(t)
	wd, _ := os.Getwd()
	c, r := startAgent(t, bin, Options{Cwd: wd})
	r.wait(t, EventReady)
	if _, err := c.Prompt("hello", false); err != nil {
		t.Fatal(err)
	}
	asked := r.wait(t, EventAsked)
	if err := c.Cancel(); err != nil {
		t.Fatal(err)
	}
	r.wait(t, EventTurnEnded)
	r.mu.Lock()
	defer r.mu.Unlock()
	answeredAt, endedAt := -1, -1
	for i, e := range r.events {
		switch {
		case e.Kind == EventAnswered && e.RequestID == asked.Waiting.RequestID:
			if e.By != program.ByCancelled {
				t.Errorf("answered by %q", e.By)
			}
			answeredAt = i
		case e.Kind == EventTurnEnded:
			endedAt = i
		}
	}
	if answeredAt < 0 || answeredAt > endedAt {
		t.Errorf("answered at %d, the turn ended at %d", answeredAt, endedAt)
	}
	if _, err := c.Answer("", "allow", false); err == nil {
		t.Error("an answer after the cancel was taken")
	}
}
