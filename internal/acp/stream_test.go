package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// scriptedAgent answers each session/prompt read on in with the lines of
// answer (written as they are, no encoding per prompt), then the prompt's
// response end_turn: what an agent streaming text costs its client alone.
func scriptedAgent(in *os.File, out *os.File, answer []byte) {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil || m.Method != "session/prompt" {
			continue
		}
		if _, err := out.Write(answer); err != nil {
			return
		}
		if _, err := out.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"stopReason":"end_turn"}}` + "\n")); err != nil {
			return
		}
	}
}

// notification is a session/update line as the SDK's agent side encodes
// it.
func notification(t testing.TB, u sdk.SessionUpdate) []byte {
	params, err := json.Marshal(sdk.SessionNotification{SessionId: "s", Update: u})
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": json.RawMessage(params)})
	if err != nil {
		t.Fatal(err)
	}
	return append(line, '\n')
}

// An agent that streams far faster than its updates are handled (5,000
// chunks written at once, past the SDK's queue of 1,024 notifications,
// which closes the connection when full) is held back by the pipe: the
// whole answer is followed and transcribed, in order, a tool call in the
// middle in its place, and the turn ends end_turn.
func TestStreamFlood(t *testing.T) {
	var answer, want, wantFollowed []byte
	for i := range 5000 {
		s := fmt.Sprintf("%d ", i)
		if i == 2500 {
			answer = append(answer, notification(t, sdk.StartToolCall("t1", "read the file", sdk.WithStartKind(sdk.ToolKindRead)))...)
			want = append(want, "\n[tool] read the file (read) pending\n"...) // on a line of its own
			wantFollowed = append(wantFollowed, "[tool] read the file (read) pending\n"...)
		}
		answer = append(answer, notification(t, sdk.UpdateAgentMessageText(s))...)
		want, wantFollowed = append(want, s...), append(wantFollowed, s...)
	}
	toAgentR, toAgentW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromAgentR, fromAgentW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fromAgentW.Close(); toAgentR.Close() })
	go scriptedAgent(toAgentR, fromAgentW, answer)
	r := &recorder{ch: make(chan Event, 100)}
	c := Start(toAgentW, fromAgentR, Options{Cwd: "/", SessionID: "s", Attached: true, Hooks: r.hooks()})
	t.Cleanup(c.Close)
	turn, err := c.Prompt("go", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var followed strings.Builder
	for {
		ups, stop, err := turn.Next(ctx)
		if err != nil {
			t.Fatalf("following: %v (so far %d bytes)", err, followed.Len())
		}
		for _, u := range ups {
			followed.WriteString(u.Text)
		}
		if stop != "" {
			if stop != "end_turn" {
				t.Fatalf("stop reason %s after %d bytes", stop, followed.Len())
			}
			break
		}
	}
	if got := followed.String(); got != string(wantFollowed) {
		t.Errorf("followed %d bytes, want %d; it starts %.80q", len(got), len(wantFollowed), got)
	}
	r.mu.Lock()
	text := r.text.String()
	r.mu.Unlock()
	if !strings.Contains(text, "> go\n"+string(want)) {
		t.Errorf("the transcript (%d bytes) is not the prompt and the answer in order; it starts %.120q", len(text), text)
	}
}
