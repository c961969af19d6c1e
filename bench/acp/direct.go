package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// direct is the peer: the bench agent driven by the SDK's own client over
// pipes, as the SDK's example client drives its agent, with nothing in
// between.
type direct struct {
	cmd  *exec.Cmd
	conn *sdk.ClientSideConnection
	sid  sdk.SessionId

	mu      sync.Mutex // guards first and bytes
	first   time.Time  // the first chunk of the prompt under way
	bytes   int
	allowed bool // answer permission requests with allow
}

func startDirect(ctx context.Context, self string) (*direct, error) {
	d := &direct{allowed: true}
	d.cmd = exec.Command(self, "agent")
	d.cmd.Stderr = os.Stderr
	in, err := d.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.conn = sdk.NewClientSideConnection(directClient{d}, in, out)
	d.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := d.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		d.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	s, err := d.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: "/", McpServers: []sdk.McpServer{}})
	if err != nil {
		d.close()
		return nil, fmt.Errorf("session/new: %w", err)
	}
	d.sid = s.SessionId
	return d, nil
}

// prompt sends text and returns the times to the first chunk and to the
// turn's end, and the bytes of text that came.
func (d *direct) prompt(ctx context.Context, text string) (first, end time.Duration, n int, err error) {
	d.mu.Lock()
	d.first, d.bytes = time.Time{}, 0
	d.mu.Unlock()
	t0 := time.Now()
	resp, err := d.conn.Prompt(ctx, sdk.PromptRequest{SessionId: d.sid, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	end = time.Since(t0)
	if err != nil {
		return 0, 0, 0, err
	}
	if resp.StopReason != sdk.StopReasonEndTurn {
		return 0, 0, 0, errors.New("stop reason " + string(resp.StopReason))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.first.Sub(t0), end, d.bytes, nil
}

func (d *direct) close() {
	if d.cmd.Process != nil {
		d.cmd.Process.Kill()
		d.cmd.Wait()
	}
}

type directClient struct{ d *direct }

func (c directClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.d.mu.Lock()
		if c.d.first.IsZero() {
			c.d.first = time.Now()
		}
		c.d.bytes += len(m.Content.Text.Text)
		c.d.mu.Unlock()
	}
	return nil
}

func (c directClient) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected("allow")}, nil
}
func (directClient) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}
func (directClient) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}
func (directClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}
func (directClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}
func (directClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}
func (directClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}
func (directClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}
