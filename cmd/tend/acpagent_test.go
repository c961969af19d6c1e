package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// acpAgentMain is the test binary run as tend-acp-agent: a small ACP agent
// on the Go SDK that answers each prompt at once ("echo N: TEXT", N its
// place in the session), keeps its sessions in $ACP_STATE (a JSON file) so
// that a later run can load them (loadSession: true), and by $ACP_MODE:
// "auth" refuses session/new with -32000, as an agent without credentials
// does; "slow" takes $ACP_DELAY over a prompt that starts "slow", honouring cancel. A prompt
// "fs" asks its client to read a file and answers with what it was told.
func acpAgentMain() {
	a := &testAgent{state: os.Getenv("ACP_STATE"), sessions: map[string]int{}, made: make(chan struct{})}
	if b, err := os.ReadFile(a.state); err == nil {
		_ = json.Unmarshal(b, &a.sessions)
	}
	c := sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	a.conn.Store(c)
	close(a.made)
	<-c.Done()
}

type testAgent struct {
	// conn is set once the connection, which serves requests from the
	// start, is made: a handler loads it (atomic, for the race detector).
	conn     atomic.Pointer[sdk.AgentSideConnection]
	made     chan struct{} // closed once conn is set
	state    string
	mu       sync.Mutex
	sessions map[string]int // session → prompts so far
}

// client is the connection, once it is made.
func (a *testAgent) client() *sdk.AgentSideConnection {
	<-a.made
	return a.conn.Load()
}

func (a *testAgent) save() {
	b, _ := json.Marshal(a.sessions)
	if a.state != "" {
		_ = os.WriteFile(a.state, b, 0o600)
	}
}

func (a *testAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{
		ProtocolVersion:   sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: true},
		AuthMethods:       []sdk.AuthMethod{{Agent: &sdk.AuthMethodAgent{Id: "api-key", Name: "API key"}}},
	}, nil
}

func (a *testAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if os.Getenv("ACP_MODE") == "auth" {
		return sdk.NewSessionResponse{}, &sdk.RequestError{Code: -32000, Message: "Authentication required", Data: "TEST_API_KEY is not set"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	id := fmt.Sprintf("sess-%d-%d", os.Getpid(), time.Now().UnixNano())
	a.sessions[id] = 0
	a.save()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(id)}, nil
}

func (a *testAgent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	a.mu.Lock()
	n, ok := a.sessions[string(p.SessionId)]
	a.mu.Unlock()
	if !ok {
		return sdk.LoadSessionResponse{}, &sdk.RequestError{Code: -32602, Message: "no such session"}
	}
	// Replay the conversation, as agents do on session/load.
	_ = a.client().SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(fmt.Sprintf("(history: %d prompts)", n))})
	return sdk.LoadSessionResponse{}, nil
}

func (a *testAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	text := ""
	for _, b := range p.Prompt {
		if b.Text != nil {
			text += b.Text.Text
		}
	}
	a.mu.Lock()
	n, ok := a.sessions[string(p.SessionId)]
	if ok {
		n++
		a.sessions[string(p.SessionId)] = n
		a.save()
	}
	a.mu.Unlock()
	if !ok {
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32602, Message: "no such session"}
	}
	if os.Getenv("ACP_MODE") == "slow" && strings.HasPrefix(text, "slow") {
		// Said first, so a test knows the turn is under way here: a
		// session/cancel that comes before it is lost (the SDK has not
		// yet made the turn's context).
		if err := a.client().SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText("slow turn under way\n")}); err != nil {
			return sdk.PromptResponse{}, err
		}
		d, _ := time.ParseDuration(os.Getenv("ACP_DELAY"))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		}
	}
	answer := fmt.Sprintf("echo %d: %s", n, text)
	if strings.TrimSpace(text) == "fs" {
		_, err := a.client().ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: p.SessionId, Path: "/etc/hostname"})
		answer = fmt.Sprintf("fs: %v", err)
	}
	if err := a.client().SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(answer)}); err != nil {
		return sdk.PromptResponse{}, err
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

func (a *testAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}
func (a *testAgent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *testAgent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *testAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *testAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
}
func (a *testAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *testAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}
