package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/program"
)

// discardLogger keeps the SDK's diagnostics out of the daemon's stderr:
// what matters of them (a line that is not JSON-RPC) the line reader
// already counts and logs in the instance's own log.
var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// client is the SDK's view of tend: what the agent may ask of its client.
// tend offers no file system and no terminal (the agent uses its own
// tools): those methods, and every other the SDK does not know, are
// answered -32601.
type client struct{ c *Conn }

var _ sdk.Client = client{}

func (cl client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return cl.c.requestPermission(ctx, p)
}

func (cl client) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	cl.c.update(n.Update)
	return nil
}

func (client) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

func (client) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

func (client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

func (client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

func (client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

func (client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

func (client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}

// textState is where the transcript is: whether its last byte ended a
// line, so a tool line never starts in the middle of message text. Guarded
// by mu: the line reader (session/update), the prompt worker and the
// permission handlers all write.
type textState struct {
	mu        sync.Mutex
	midLine   bool
	toolTitle map[string]string // tool call id → title and kind, for its updates
	toolKind  map[string]string
}

// transcribe appends s to the transcript; line says s is whole lines, to
// start on a line of their own.
func (c *Conn) transcribe(s string, line bool) {
	ts := &c.text
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if line && ts.midLine {
		s = "\n" + s
	}
	if s == "" {
		return
	}
	ts.midLine = s[len(s)-1] != '\n'
	if c.opts.Hooks.Text != nil {
		c.opts.Hooks.Text([]byte(s))
	}
}

// transcribeBytes appends message text to the transcript, as
// transcribe(string(p), false) without the copy: Hooks.Text keeps nothing
// of p past the call.
func (c *Conn) transcribeBytes(p []byte) {
	if len(p) == 0 {
		return
	}
	ts := &c.text
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.midLine = p[len(p)-1] != '\n'
	if c.opts.Hooks.Text != nil {
		c.opts.Hooks.Text(p)
	}
}

// note is a line of tend's own in the transcript.
func (c *Conn) note(s string) { c.transcribe(s+"\n", true) }

// shownKinds are the kinds of session/update that update shows; the line
// reader decodes no other (sessionUpdate).
var shownKinds = map[string]bool{"agent_message_chunk": true, "tool_call": true, "tool_call_update": true, "plan": true}

// sessionUpdate is a session/update notification, from the line reader
// (wire.go), which read nothing since: a chunk of message text as the
// reader found it, every other kind decoded with the SDK's types.
func (c *Conn) sessionUpdate(line []byte, m *message) {
	if !shownKinds[m.Kind] {
		return // thoughts, commands, modes, usage: not in the transcript
	}
	if m.Kind == "agent_message_chunk" && m.Text != nil {
		c.batchText(*m.Text)
		return
	}
	c.flushText() // what came before it goes first
	var n struct {
		Params sdk.SessionNotification `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return // as the SDK does a notification it cannot decode: dropped (its raw record stays)
	}
	c.update(n.Params.Update)
}

// live is the turn under way, if any, and whether what the agent sends is
// live: during session/load the agent replays the conversation, which the
// log holds already, and it is not written again.
func (c *Conn) live() (*Turn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur, !c.loading
}

// textBatch is the message text the line reader has read since it last
// had to wait for the agent: the chunks of a streamed answer that came
// together go to the transcript and to the turn's follower as one piece
// (one log record, one update, one wake of the follower) rather than one
// each, which cost more than the 4 KiB chunks themselves. The reader
// hands the batch on before it waits, before any other line, and at the
// end of the agent's stdout (wireHooks.idle), so the order stays the
// wire's. Owned by the line reader's goroutine.
type textBatch struct {
	buf   []byte // the batch, for the transcript (its hook copies it)
	first string // the batch's first chunk, handed to the turn as it is when it is the only one
	turn  *Turn
	n     int // chunks in the batch
}

// batchText keeps a chunk of message text for the batch (see textBatch).
func (c *Conn) batchText(s string) {
	t, live := c.live()
	if !live || s == "" {
		return
	}
	b := &c.batch
	if b.n > 0 && b.turn != t {
		c.flushText()
	}
	if b.n == 0 {
		b.first = s
	}
	b.buf = append(b.buf, s...)
	b.turn = t
	b.n++
	if len(b.buf) >= maxBatch {
		c.flushText()
	}
}

// maxBatch bounds a batch of text: the reader's buffer holds 64 KiB, a
// single line up to MaxMessage.
const maxBatch = 256 << 10

// flushText hands the batch of text on: the transcript, and the turn
// that was under way when it came.
func (c *Conn) flushText() {
	b := &c.batch
	if b.n == 0 {
		return
	}
	c.transcribeBytes(b.buf)
	if b.turn != nil {
		s := b.first
		if b.n > 1 {
			s = string(b.buf)
		}
		b.turn.add(program.TurnUpdate{Type: program.UpdateText, Text: s})
	}
	b.first, b.turn, b.n = "", nil, 0
	if cap(b.buf) > maxBatch {
		b.buf = nil // a long line's worth is not kept
	}
	b.buf = b.buf[:0]
}

// messageText is a chunk of the agent's message: the transcript, and the
// answer of the turn under way.
func (c *Conn) messageText(s string) {
	t, live := c.live()
	if !live || s == "" {
		return
	}
	c.transcribe(s, false)
	if t != nil {
		t.add(program.TurnUpdate{Type: program.UpdateText, Text: s})
	}
}

// update is one session/update: the transcript, and the answer of the
// turn under way (the kinds in shownKinds).
func (c *Conn) update(u sdk.SessionUpdate) {
	if u.AgentMessageChunk != nil {
		c.messageText(blockText(u.AgentMessageChunk.Content))
		return
	}
	t, live := c.live()
	if !live {
		return
	}
	add := func(u program.TurnUpdate) {
		if t != nil {
			t.add(u)
		}
	}
	switch {
	case u.ToolCall != nil:
		tc := u.ToolCall
		c.text.mu.Lock()
		if c.text.toolTitle == nil {
			c.text.toolTitle, c.text.toolKind = map[string]string{}, map[string]string{}
		}
		if len(c.text.toolTitle) > 1024 {
			clear(c.text.toolTitle)
			clear(c.text.toolKind)
		}
		c.text.toolTitle[string(tc.ToolCallId)], c.text.toolKind[string(tc.ToolCallId)] = tc.Title, string(tc.Kind)
		c.text.mu.Unlock()
		line := toolLine(tc.Title, string(tc.Kind), string(tc.Status))
		c.transcribe(line, true)
		add(program.TurnUpdate{Type: program.UpdateTool, Text: line})
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		if tc.Status == nil {
			return // content alone: the line says what changed, not every byte
		}
		c.text.mu.Lock()
		title, kind := c.text.toolTitle[string(tc.ToolCallId)], c.text.toolKind[string(tc.ToolCallId)]
		c.text.mu.Unlock()
		if tc.Title != nil {
			title = *tc.Title
		}
		if tc.Kind != nil {
			kind = string(*tc.Kind)
		}
		line := toolLine(title, kind, string(*tc.Status))
		c.transcribe(line, true)
		add(program.TurnUpdate{Type: program.UpdateTool, Text: line})
	case u.Plan != nil:
		var b strings.Builder
		for _, e := range u.Plan.Entries {
			fmt.Fprintf(&b, "[plan] %s %s\n", planMark(string(e.Status)), oneLine(e.Content))
		}
		if b.Len() > 0 {
			c.transcribe(b.String(), true)
			add(program.TurnUpdate{Type: program.UpdatePlan, Text: b.String()})
		}
	}
}

// toolLine is a tool call's line: [tool] TITLE (KIND) STATUS.
func toolLine(title, kind, status string) string {
	if kind == "" {
		kind = "other"
	}
	if status == "" {
		status = "pending"
	}
	return fmt.Sprintf("[tool] %s (%s) %s\n", oneLine(title), kind, status)
}

func planMark(status string) string {
	switch status {
	case "completed":
		return "[x]"
	case "in_progress":
		return "[~]"
	}
	return "[ ]"
}

// blockText is the text of a content block; other kinds are named.
func blockText(b sdk.ContentBlock) string {
	switch {
	case b.Text != nil:
		return b.Text.Text
	case b.Image != nil:
		return "[image]"
	case b.Audio != nil:
		return "[audio]"
	case b.ResourceLink != nil:
		return "[link] " + b.ResourceLink.Uri
	case b.Resource != nil:
		return "[resource]"
	}
	return ""
}

// oneLine keeps what goes on one transcript line on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ⏎ ", "\n", " ⏎ ", "\r", " ").Replace(s)
}
