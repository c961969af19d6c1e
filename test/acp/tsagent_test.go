// Package acptest holds no code: its tests drive the ACP agents tend's
// protocol tests stand on (test/acp/README.md) — the TypeScript-SDK agent
// in ts-agent/ directly with the Go SDK's client, and the real agent CLIs
// from npm under tend.
package acptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/testutil"
)

// recorder is the test's ACP client: it keeps every session/update and
// answers permission requests with answer. mu guards updates and asked.
type recorder struct {
	mu      sync.Mutex
	updates []acp.SessionUpdate
	asked   []acp.RequestPermissionRequest
	answer  func(context.Context, acp.RequestPermissionRequest) acp.RequestPermissionResponse
}

func (r *recorder) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, n.Update)
	return nil
}

func (r *recorder) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	r.mu.Lock()
	r.asked = append(r.asked, p)
	answer := r.answer
	r.mu.Unlock()
	if answer == nil {
		return acp.RequestPermissionResponse{}, acp.NewInternalError("the test did not expect a permission request")
	}
	return answer(ctx, p), nil
}

// The test client offers no file system and no terminal, as tend does.
func (r *recorder) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound("fs/read_text_file")
}
func (r *recorder) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound("fs/write_text_file")
}
func (r *recorder) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound("terminal/create")
}
func (r *recorder) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound("terminal/kill")
}
func (r *recorder) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound("terminal/output")
}
func (r *recorder) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound("terminal/release")
}
func (r *recorder) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound("terminal/wait_for_exit")
}

// take returns the updates received so far and forgets them.
func (r *recorder) take() []acp.SessionUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.updates
	r.updates = nil
	return u
}

// chunks are the texts of the message chunks of one side: the agent's, or
// (replayed by session/load) the user's.
func chunks(us []acp.SessionUpdate, user bool) []string {
	var out []string
	for _, u := range us {
		var c *acp.ContentBlock
		switch {
		case user && u.UserMessageChunk != nil:
			c = &u.UserMessageChunk.Content
		case !user && u.AgentMessageChunk != nil:
			c = &u.AgentMessageChunk.Content
		}
		if c != nil && c.Text != nil {
			out = append(out, c.Text.Text)
		}
	}
	return out
}

// text is the agent's answer: its message chunks joined.
func text(us []acp.SessionUpdate) string { return strings.Join(chunks(us, false), "") }

// agentRun is one process of the TypeScript-SDK agent and the client
// connection to it.
type agentRun struct {
	cmd    *exec.Cmd
	conn   *acp.ClientSideConnection
	rec    *recorder
	stderr *testutil.Buffer
	exited chan struct{}
	killed bool // kill has been called: the group is not killed twice
}

// spawn starts an agent in dir (with env, as cred when not nil, in a
// process group of its own) and connects the test's client to it.
func spawn(t *testing.T, argv []string, dir string, env []string, cred *syscall.Credential) *agentRun {
	t.Helper()
	a := &agentRun{rec: &recorder{}, stderr: &testutil.Buffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(argv[0], argv[1:]...)
	a.cmd.Dir, a.cmd.Env = dir, env
	a.cmd.Stderr = a.stderr
	// The npm commands are node wrappers around the agent's own process
	// (codex-acp's binary, Claude Code): the test ends them all.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	stdin, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			t.Logf("agent pid %d said on stderr:\n%s", a.cmd.Process.Pid, a.stderr.String())
		}
	})
	a.conn = acp.NewClientSideConnection(a.rec, stdin, stdout)
	a.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return a
}

// initialize says initialize as tend does: protocol 1, no file system or
// terminal offered.
func (a *agentRun) initialize(t *testing.T) acp.InitializeResponse {
	t.Helper()
	init, err := a.conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, a.stderr.String())
	}
	return init
}

// startAgent starts the TypeScript-SDK agent in dir, where it keeps its
// sessions, and initializes the connection.
func startAgent(t *testing.T, argv []string, dir string) *agentRun {
	t.Helper()
	a := spawn(t, argv, dir, append(os.Environ(), "TS_AGENT_SESSIONS="), nil)
	init := a.initialize(t)
	if init.ProtocolVersion != acp.ProtocolVersionNumber || !init.AgentCapabilities.LoadSession {
		t.Fatalf("initialize answered protocol %d, loadSession %v; want %d, true", init.ProtocolVersion, init.AgentCapabilities.LoadSession, acp.ProtocolVersionNumber)
	}
	return a
}

// kill SIGKILLs the agent's process group, as a crash or the OOM killer
// would, and waits for the agent to be gone.
func (a *agentRun) kill() {
	if a.killed {
		return
	}
	a.killed = true
	syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	<-a.exited
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
	t.Cleanup(cancel)
	return ctx
}

func (a *agentRun) newSession(t *testing.T, dir string) acp.SessionId {
	t.Helper()
	s, err := a.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return s.SessionId
}

// prompt sends one prompt and returns the stop reason and the updates of
// the turn.
func (a *agentRun) prompt(t *testing.T, sid acp.SessionId, words string) (acp.StopReason, []acp.SessionUpdate) {
	t.Helper()
	a.rec.take()
	res, err := a.conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(words)}})
	if err != nil {
		t.Fatalf("session/prompt %q: %v", words, err)
	}
	return res.StopReason, a.rec.take()
}

func wantAnswer(t *testing.T, us []acp.SessionUpdate, want ...string) {
	t.Helper()
	got := text(us)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the answer lacks %q; it was:\n%s", w, got)
		}
	}
}

// TestTSAgentResumesAfterSIGKILL: the conversation survives the process.
// Two prompts, SIGKILL, a new process, session/load (which replays the
// conversation as session/update notifications) and a third prompt whose
// answer names the first two.
func TestTSAgentResumesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	argv := testutil.TSAgent(t)
	dir := t.TempDir()
	a := startAgent(t, argv, dir)
	sid := a.newSession(t, dir)
	if _, err := os.Stat(filepath.Join(dir, ".ts-agent-sessions", string(sid)+".json")); err != nil {
		t.Fatalf("the session is not on disk: %v", err)
	}
	stop, us := a.prompt(t, sid, "the sky is green")
	if stop != acp.StopReasonEndTurn {
		t.Fatalf("first prompt: stop reason %q, want end_turn", stop)
	}
	wantAnswer(t, us, `turn 1; nothing said before; you say now: "the sky is green".`)
	stop, us = a.prompt(t, sid, "my cat is Tom")
	if stop != acp.StopReasonEndTurn {
		t.Fatalf("second prompt: stop reason %q, want end_turn", stop)
	}
	wantAnswer(t, us, `turn 2; you said before: "the sky is green"; you say now: "my cat is Tom".`)

	a.kill()
	b := startAgent(t, argv, dir)
	if _, err := b.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: dir, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load after SIGKILL: %v\nstderr:\n%s", err, b.stderr.String())
	}
	replay := b.rec.take()
	if got, want := strings.Join(chunks(replay, true), "|"), "the sky is green|my cat is Tom"; got != want {
		t.Errorf("session/load replayed the user's messages as %q, want %q", got, want)
	}
	wantAnswer(t, replay, "turn 1;", "turn 2;")
	stop, us = b.prompt(t, sid, "what did I say?")
	if stop != acp.StopReasonEndTurn {
		t.Fatalf("third prompt: stop reason %q, want end_turn", stop)
	}
	wantAnswer(t, us, `turn 3; you said before: "the sky is green", "my cat is Tom"; you say now: "what did I say?".`)
}

// TestTSAgentLoadsOnlyKnownSessions: a session it never had is "not found"
// (-32002), not a new empty one.
func TestTSAgentLoadsOnlyKnownSessions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startAgent(t, testutil.TSAgent(t), dir)
	_, err := a.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: "ts-never-made", Cwd: dir, McpServers: []acp.McpServer{}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32002 {
		t.Fatalf("session/load of an unknown session: %v, want error -32002", err)
	}
}

// TestTSAgentToolsPlanAndPermission: the keywords of test/acp/README.md
// bring a tool call, a plan and a permission request whose answer the
// agent reports.
func TestTSAgentToolsPlanAndPermission(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startAgent(t, testutil.TSAgent(t), dir)
	sid := a.newSession(t, dir)

	stop, us := a.prompt(t, sid, "use a tool and make a plan")
	if stop != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %q, want end_turn", stop)
	}
	var tool, done, plan bool
	for _, u := range us {
		switch {
		case u.ToolCall != nil:
			tool = u.ToolCall.Title == "Reading the session file" && u.ToolCall.Kind == acp.ToolKindRead
		case u.ToolCallUpdate != nil:
			done = u.ToolCallUpdate.Status != nil && *u.ToolCallUpdate.Status == acp.ToolCallStatusCompleted
		case u.Plan != nil:
			plan = len(u.Plan.Entries) == 2
		}
	}
	if !tool || !done || !plan {
		t.Errorf("tool call %v, completed %v, plan of 2 entries %v; want all:\n%+v", tool, done, plan, us)
	}
	wantAnswer(t, us, "I read the session file.")

	for _, c := range []struct{ pick, says string }{
		{"allow_once", "Permission granted (allow-once); I wrote notes.txt."},
		{"reject_once", "Permission refused (reject-once); I wrote nothing."},
	} {
		a.rec.mu.Lock()
		a.rec.asked = nil
		a.rec.answer = func(_ context.Context, p acp.RequestPermissionRequest) acp.RequestPermissionResponse {
			for _, o := range p.Options {
				if string(o.Kind) == c.pick {
					return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}
				}
			}
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
		}
		a.rec.mu.Unlock()
		stop, us := a.prompt(t, sid, "ask permission to write notes")
		if stop != acp.StopReasonEndTurn {
			t.Fatalf("%s: stop reason %q, want end_turn", c.pick, stop)
		}
		wantAnswer(t, us, c.says)
		a.rec.mu.Lock()
		asked := a.rec.asked
		a.rec.mu.Unlock()
		if len(asked) != 1 || len(asked[0].Options) != 2 ||
			asked[0].Options[0].Kind != acp.PermissionOptionKindAllowOnce || asked[0].Options[1].Kind != acp.PermissionOptionKindRejectOnce ||
			asked[0].ToolCall.Title == nil || *asked[0].ToolCall.Title != "Writing notes.txt" {
			t.Errorf("%s: permission requests %+v, want one for Writing notes.txt with allow_once and reject_once", c.pick, asked)
		}
	}
}

// TestTSAgentCancel: session/cancel ends a streaming turn, and a turn
// waiting for a permission answer, with stop reason cancelled.
func TestTSAgentCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startAgent(t, testutil.TSAgent(t), dir)
	sid := a.newSession(t, dir)

	// Whether the agent has begun to answer: updates are only ever added
	// during the turn.
	begun := func() bool {
		a.rec.mu.Lock()
		defer a.rec.mu.Unlock()
		return len(a.rec.updates) > 0
	}
	turn := func(words string, started func() bool) acp.StopReason {
		t.Helper()
		a.rec.take()
		type result struct {
			res acp.PromptResponse
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := a.conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(words)}})
			done <- result{res, err}
		}()
		testutil.Eventually(t, "the turn of "+words+" to begin", started)
		if err := a.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("prompt %q: %v", words, r.err)
			}
			return r.res.StopReason
		case <-time.After(testutil.Deadline):
			t.Fatalf("prompt %q did not end after session/cancel", words)
		}
		return ""
	}

	if stop := turn("answer slow please", begun); stop != acp.StopReasonCancelled {
		t.Errorf("a cancelled streaming turn stopped with %q, want cancelled", stop)
	}
	if got := text(a.rec.take()); strings.Contains(got, "tick 50.") {
		t.Errorf("the cancelled turn streamed to its end:\n%s", got)
	}

	// The client never answers this request: the agent stops waiting for
	// it when the turn is cancelled.
	asked := make(chan struct{})
	var once sync.Once
	a.rec.mu.Lock()
	a.rec.answer = func(ctx context.Context, _ acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		once.Do(func() { close(asked) })
		<-ctx.Done()
		return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
	}
	a.rec.mu.Unlock()
	waiting := func() bool {
		select {
		case <-asked:
			return true
		default:
			return false
		}
	}
	if stop := turn("ask permission", waiting); stop != acp.StopReasonCancelled {
		t.Errorf("a turn cancelled while asking permission stopped with %q, want cancelled", stop)
	}

	// The session goes on after a cancel.
	a.rec.mu.Lock()
	a.rec.answer = nil
	a.rec.mu.Unlock()
	if stop, us := a.prompt(t, sid, "still there?"); stop != acp.StopReasonEndTurn {
		t.Errorf("the prompt after the cancels stopped with %q, want end_turn", stop)
	} else {
		wantAnswer(t, us, `turn 3; you said before: "answer slow please", "ask permission";`)
	}
}

// TestTSAgentCrashMidTurn: the word crash makes the agent exit (status 3)
// in the middle of its answer; the prompt it was answering is on disk, so a
// new process loads the session with it.
func TestTSAgentCrashMidTurn(t *testing.T) {
	t.Parallel()
	argv := testutil.TSAgent(t)
	dir := t.TempDir()
	a := startAgent(t, argv, dir)
	sid := a.newSession(t, dir)
	if _, err := a.conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("crash now")}}); err == nil {
		t.Fatal("a prompt to crash was answered")
	}
	<-a.exited
	if code := a.cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("the agent exited with %d, want 3", code)
	}
	b := startAgent(t, argv, dir)
	if _, err := b.conn.LoadSession(ctxT(t), acp.LoadSessionRequest{SessionId: sid, Cwd: dir, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load after the crash: %v", err)
	}
	if got := strings.Join(chunks(b.rec.take(), true), "|"); got != "crash now" {
		t.Errorf("session/load replayed the user's messages as %q, want %q", got, "crash now")
	}
	if _, us := b.prompt(t, sid, "again"); !strings.Contains(text(us), `turn 2; you said before: "crash now";`) {
		t.Errorf("the answer after the crash: %q", text(us))
	}
}
