package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// shAgent is an ACP agent in sh: it opens session s1 and answers every
// prompt with the message chunk $CHUNK and the tool call $TOOL (JSON
// strings the test gives in its environment), then end_turn.
const shAgent = `#!/bin/sh
id() { printf '%s' "$1" | sed 's/.*"id":\([0-9]*\).*/\1/'; }
while read -r l; do
	case "$l" in
	*'"method":"initialize"'*)
		printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$(id "$l")" ;;
	*'"method":"session/new"'*)
		printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$(id "$l")" ;;
	*'"method":"session/prompt"'*)
		printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}\n' "$CHUNK"
		printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"%s","kind":"edit","status":"pending"}}}\n' "$TOOL"
		sleep 0.2
		printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$(id "$l")" ;;
	esac
done
`

// TestACPPromptEscapes: tend prompt prints what the agent says as tend
// logs prints a log (docs/trust.md): to a pipe the message text as it
// came, to a terminal escaped but for its colours (an OSC 52 clipboard
// write is shown, not run); the tool call's line, whose title is the
// agent's, is escaped either way, as all human output is.
func TestACPPromptEscapes(t *testing.T) {
	script := filepath.Join(t.TempDir(), "agent.sh")
	write(t, script, shAgent)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	chunk := `\u001b[31mred\u001b[0m and \u001b]52;c;ZXZpbA==\u0007 done\n`
	tool := `evil \u001b[2J\u202e title`
	tend, dir, c := acpFleet(t, fmt.Sprintf("[program.sh]\ncommand = [%q]\nprotocol = \"acp\"\nenv = { CHUNK = %q, TOOL = %q }\n", script, chunk, tool))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	idleACP(t, c, "sh:0")

	code, out, errOut := tendRun(t, tend, "--socket", sock, "prompt", "sh:0", "hi")
	if code != 0 {
		t.Fatalf("tend prompt to a pipe: exit %d %s", code, errOut)
	}
	if want := "\x1b[31mred\x1b[0m and \x1b]52;c;ZXZpbA==\x07 done\n"; !strings.Contains(out, want) {
		t.Errorf("to a pipe, the message text is not as it came (%q):\n%q", want, out)
	}
	escapedTool := `[tool] evil \x1b[2J\u202e title (edit) pending`
	if !strings.Contains(out, escapedTool) {
		t.Errorf("to a pipe, the tool line is not escaped (%q):\n%q", escapedTool, out)
	}

	out = promptInPTY(t, tend, sock, "sh:0", "again")
	if want := "\x1b[31mred\x1b[0m and \\x1b]52;c;ZXZpbA==\\x07 done"; !strings.Contains(out, want) {
		t.Errorf("to a terminal, the message text is not escaped but for its colours (%q):\n%q", want, out)
	}
	if !strings.Contains(out, escapedTool) {
		t.Errorf("to a terminal, the tool line is not escaped (%q):\n%q", escapedTool, out)
	}
	if bad := rawControl(sgr.ReplaceAllString(out, "")); bad != "" {
		t.Errorf("tend prompt printed %s raw to a terminal:\n%q", bad, out)
	}
}

// sgr matches SGR sequences, the only ones a terminal may get.
var sgr = regexp.MustCompile("\x1b\\[[0-9;:]*m")

// promptInPTY runs tend prompt ID TEXT with its stdout a terminal, and
// returns what it printed there (newlines as "\n").
func promptInPTY(t *testing.T, tend, sock, id, text string) string {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	cmd := exec.Command(tend, "--socket", sock, "prompt", id, text)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = slave, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master) // EIO once the last holder of the slave has gone
		got <- b
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tend prompt in a terminal: %v %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tend prompt in a terminal did not end: %s", stderr.String())
	}
	return strings.ReplaceAll(string(<-got), "\r\n", "\n")
}

// TestACPPromptLines: the SDK's example agent streams message text that
// does not end its line before each tool call; tend prompt prints each
// tool and permission line on a line of its own, as the transcript has
// it, and ends the answer with a newline, so the shell's prompt does not
// follow it on its last line.
func TestACPPromptLines(t *testing.T) {
	agent := exampleACPAgent(t)
	tend, dir, c := acpFleet(t, fmt.Sprintf("[program.coder]\ncommand = [%q]\nprotocol = \"acp\"\npermission = \"allow\"\n", agent))
	idleACP(t, c, "coder:0")
	code, out, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "prompt", "coder:0", "hello")
	if code != 0 {
		t.Fatalf("prompt: exit %d %s", code, errOut)
	}
	if n := strings.Count(out, "[tool] "); n < 2 || strings.Count(out, "\n[tool] ") != n || !strings.Contains(out, "\n[permission] ") {
		t.Errorf("a tool or permission line does not start a line:\n%s", out)
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("the answer does not end its line: %q", out)
	}
}
