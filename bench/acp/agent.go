package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// agentMain is this binary run as `acp agent`: the agent both sides
// drive, on the Go SDK, with no model. Its answers:
//
//   - "stream N": N bytes of text in chunks of 4 KiB (the last shorter),
//     then end_turn;
//   - "ask": a permission request whose title is the wall-clock time it
//     was sent (unix nanoseconds), then "done" once answered;
//   - anything else: one chunk, "ok", then end_turn.
func agentMain() {
	a := &benchAgent{}
	a.conn = sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	<-a.conn.Done()
}

type benchAgent struct{ conn *sdk.AgentSideConnection }

const chunk = 4 << 10

func (a *benchAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	text := ""
	for _, b := range p.Prompt {
		if b.Text != nil {
			text += b.Text.Text
		}
	}
	say := func(s string) error {
		return a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(s)})
	}
	switch {
	case strings.HasPrefix(text, "stream "):
		n, _ := strconv.Atoi(strings.TrimPrefix(text, "stream "))
		buf := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789 tend acp bench\n", chunk/52+1)[:chunk]
		for n > 0 {
			k := min(n, chunk)
			if err := say(buf[:k]); err != nil {
				return sdk.PromptResponse{}, err
			}
			n -= k
		}
	case text == "ask":
		title := strconv.FormatInt(time.Now().UnixNano(), 10)
		_, err := a.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
			SessionId: p.SessionId,
			ToolCall:  sdk.ToolCallUpdate{ToolCallId: "t1", Title: &title, Kind: sdk.Ptr(sdk.ToolKindEdit)},
			Options: []sdk.PermissionOption{
				{Kind: sdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
				{Kind: sdk.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
			},
		})
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		if err := say("done"); err != nil {
			return sdk.PromptResponse{}, err
		}
	default:
		if err := say("ok"); err != nil {
			return sdk.PromptResponse{}, err
		}
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

func (a *benchAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber}, nil
}

var sessions int

func (a *benchAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	sessions++
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(fmt.Sprintf("bench-%d-%d", os.Getpid(), sessions))}, nil
}

func (a *benchAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}
func (a *benchAgent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *benchAgent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *benchAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *benchAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
}
func (a *benchAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *benchAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}
