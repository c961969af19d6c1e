package acp

import (
	"context"
	"io"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

// streamAgent answers every prompt with n bytes of text in 4 KiB chunks.
type streamAgent struct {
	conn *sdk.AgentSideConnection
	n    int
}

func (a *streamAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	chunk := strings.Repeat("x", 4096)
	for n := a.n; n > 0; n -= len(chunk) {
		if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(chunk[:min(n, len(chunk))])}); err != nil {
			return sdk.PromptResponse{}, err
		}
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}
func (a *streamAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{ProtocolVersion: 1}, nil
}
func (a *streamAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	return sdk.NewSessionResponse{SessionId: "s"}, nil
}
func (a *streamAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}
func (a *streamAgent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *streamAgent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *streamAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *streamAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, nil
}
func (a *streamAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *streamAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}

// BenchmarkStream is what one streamed MB costs the client side alone
// (the line reader, the SDK, the transcript and a follower), over
// in-memory pipes.
func BenchmarkStream(b *testing.B) {
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	a := &streamAgent{n: 1 << 20}
	a.conn = sdk.NewAgentSideConnection(a, fromAgentW, toAgentR)
	a.conn.SetLogger(discardLogger)
	ready := make(chan struct{})
	c := Start(toAgentW, fromAgentR, Options{Cwd: "/", Permission: "allow", Hooks: Hooks{
		Event: func(e Event) {
			if e.Kind == EventReady {
				close(ready)
			}
		},
		Text: func([]byte) {},
		Raw:  func(bool, []byte) {},
	}})
	defer c.Close()
	<-ready
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := c.Prompt("go", true)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, stop, err := t.Next(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if stop != "" {
				break
			}
		}
	}
}
