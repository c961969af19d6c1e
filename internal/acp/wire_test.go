package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// update is a session/update the line reader handed to its hook.
type update struct {
	line string
	m    message
}

// run feeds input through the line reader and dispatcher, as pump does,
// with requests 1 and 2 of this connection's on the wire; it returns what
// reached the SDK, the lines that were not JSON-RPC, the stray ids, and
// why it stopped.
func run(input []byte, max int) (sdkGot []string, notACP []string, stray []string, err error) {
	sdkGot, notACP, stray, _, err = runUpdates(input, max)
	return sdkGot, notACP, stray, err
}

// runUpdates is run with the update and idle hooks set, as a Conn sets
// them: the session/update notifications it was handed come back too. It
// runs pump's loop itself, and fails the test when an update the hook was handed
// is not handed on (idle) before a line goes to the SDK, or at the end.
// Lines are bounded to max bytes.
func runUpdates(input []byte, max int) (sdkGot []string, notACP []string, stray []string, updates []update, err error) {
	t := newIDs(1000)
	t.out([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	t.out([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`))
	pending := 0 // updates not yet handed on
	sdk := &orderedWriter{pending: &pending}
	h := wireHooks{
		notACP: func(l []byte) { notACP = append(notACP, string(l)) },
		stray:  func(id string) { stray = append(stray, id) },
		update: func(l []byte, m *message) {
			updates = append(updates, update{string(l), *m})
			pending++
		},
		idle: func() { pending = 0 },
	}
	err = pumpLines(newLineReader(bytes.NewReader(input), max), sdk, t, h)
	if pending != 0 {
		sdk.bad = append(sdk.bad, "the reader ended with updates not handed on")
	}
	if len(sdk.bad) > 0 {
		err = errors.New(strings.Join(sdk.bad, "; "))
	}
	for _, l := range strings.SplitAfter(sdk.String(), "\n") {
		if l != "" {
			sdkGot = append(sdkGot, l)
		}
	}
	return sdkGot, notACP, stray, updates, err
}

// orderedWriter is the SDK's side of the pipe: it notes a line that
// reaches it while an update is still held back.
type orderedWriter struct {
	bytes.Buffer
	pending *int
	bad     []string
}

func (w *orderedWriter) Write(p []byte) (int, error) {
	if *w.pending != 0 {
		w.bad = append(w.bad, "a line reached the SDK before the updates read before it were handed on: "+string(p))
	}
	return w.Buffer.Write(p)
}

func TestLineReader(t *testing.T) {
	in := "banner: starting up\n" +
		`{"jsonrpc":"2.0","id":1001,"result":{"protocolVersion":1}}` + "\n" +
		"\n" +
		`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n" + // no request of ours
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}` + "\n" +
		`{"jsonrpc":"1.0","id":1002,"result":{}}` + "\n" +
		`[1,2]` + "\n" +
		`{"jsonrpc":"2.0","id":1001,"result":{}}` + "\n" + // answered already
		`{"jsonrpc":"2.0","id":1002,"error":{"code":-32000,"message":"Authentication required"}}`
	got, bad, stray, ups, err := runUpdates([]byte(in), MaxMessage)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stopped with %v", err)
	}
	if len(ups) != 1 || ups[0].m.Kind != "" {
		t.Errorf("updates: %+v", ups)
	}
	if len(got) != 3 {
		t.Fatalf("the SDK got %d lines: %q", len(got), got)
	}
	var first struct {
		ID int `json:"id"`
	}
	if json.Unmarshal([]byte(got[0]), &first); first.ID != 1 {
		t.Errorf("the response's id reached the SDK as %d, not its own 1: %s", first.ID, got[0])
	}
	if !strings.Contains(got[2], `"id":2`) || !strings.Contains(got[2], "Authentication required") {
		t.Errorf("last: %s", got[2])
	}
	if len(bad) != 3 || bad[0] != "banner: starting up" {
		t.Errorf("not acp: %q", bad)
	}
	if len(stray) != 2 || stray[0] != "7" || stray[1] != "1001" {
		t.Errorf("stray: %q", stray)
	}
}

// A line over the bound ends the stream with ErrTooLarge; one at the
// bound passes.
func TestLineReaderBound(t *testing.T) {
	msg := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("a", 100) + `"}`
	if _, _, _, err := run([]byte(msg+"\n"), len(msg)); !errors.Is(err, io.EOF) {
		t.Errorf("at the bound: %v", err)
	}
	if _, _, _, err := run([]byte(msg+"\n"), len(msg)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
	big := bytes.Repeat([]byte("x"), MaxMessage+1)
	if _, _, _, err := run(big, MaxMessage); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over 8 MiB without a newline: %v", err)
	}
}

func FuzzACPReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1001,"result":{}}` + "\nnot json\n" + `{"jsonrpc":"2.0","method":"m"}`))
	f.Add([]byte("\r\n\n{\"jsonrpc\":\"2.0\",\"id\":1e3,\"result\":1}\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":{"a":1},"error":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\u00e9\"\n"}}}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","content":[]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, bad, stray, ups, err := runUpdates(data, 256)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("stopped with %v", err)
		}
		for _, l := range got {
			if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
				t.Fatalf("the SDK got a line that is not one line: %q", l)
			}
			m, ok := classify([]byte(strings.TrimSpace(l)))
			if !ok {
				t.Fatalf("the SDK got a line that is not JSON-RPC: %q", l)
			}
			if m.Method == "" && string(m.ID) != "1" && string(m.ID) != "2" {
				t.Fatalf("a response to no request of ours reached the SDK: %q", l)
			}
		}
		for _, u := range ups {
			if u.m.Method != "session/update" || !u.m.notification() {
				t.Fatalf("the update hook got %+v", u)
			}
			// Where the SDK's own types read the line as a chunk of
			// message text, the one decode of the line reader reads the
			// same text.
			var n struct {
				Params sdk.SessionNotification `json:"params"`
			}
			if json.Unmarshal([]byte(u.line), &n) != nil || n.Params.Update.AgentMessageChunk == nil || n.Params.Update.AgentMessageChunk.Content.Text == nil {
				continue
			}
			if u.m.Kind == "agent_message_chunk" && u.m.Text != nil && *u.m.Text != n.Params.Update.AgentMessageChunk.Content.Text.Text {
				t.Fatalf("text %q, the SDK's %q: %s", *u.m.Text, n.Params.Update.AgentMessageChunk.Content.Text.Text, u.line)
			}
		}
		_ = bad
		_ = stray
	})
}

// A session/update notification goes to the update hook, decoded once:
// its kind, and a text block's text; every other message to the SDK.
func TestSessionUpdates(t *testing.T) {
	in := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\"b\u00e9\n"}}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"session\/update","params":{"update":{"content":{"text":"x","type":"image","data":"","mimeType":"image/png"},"sessionUpdate":"agent_message_chunk"},"sessionId":"s"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/update","params":[1,2]}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":"nope"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"method":"session/update","params":{}}` + "\n" + // a request: the SDK's to answer
		`{"jsonrpc":"2.0","method":5}` + "\n" +
		`{"jsonrpc":"2.0","method":"session/update"` + "\n"
	got, bad, _, ups, err := runUpdates([]byte(in), MaxMessage)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stopped with %v", err)
	}
	if len(ups) != 5 {
		t.Fatalf("%d updates: %+v", len(ups), ups)
	}
	if m := ups[0].m; m.Kind != "agent_message_chunk" || m.Text == nil || *m.Text != "a\"b\u00e9\n" {
		t.Errorf("text chunk: %+v", m)
	}
	if m := ups[1].m; m.Kind != "agent_message_chunk" || m.Text != nil {
		t.Errorf("image chunk: %+v", m)
	}
	if m := ups[2].m; m.Kind != "tool_call" || m.Text != nil {
		t.Errorf("tool call: %+v", m)
	}
	for _, u := range ups[3:] {
		if u.m.Kind != "" || u.m.Text != nil {
			t.Errorf("params of another shape: %+v", u.m)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], `"id":5`) {
		t.Errorf("the SDK got %q", got)
	}
	if len(bad) != 2 {
		t.Errorf("not acp: %q", bad)
	}
}
