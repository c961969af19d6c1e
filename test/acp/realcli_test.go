package acptest

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestRealCLIsUnderTend: each real agent CLI from npm, started by
// examples/agents/acp/tend.toml (protocol = "acp") on a machine where no
// one has logged in, reaches the state test/acp/README.md documents. Gemini
// CLI and codex-acp refuse session/new: the instance is fatal at once, why
// naming the agent's own reason and its methods. claude-code-acp as another
// user opens a session (it checks the login only at the prompt): ready, and
// a prompt fails with its reason. claude-code-acp as root fails
// session/new, a crash whose why quotes its stderr's reason.
func TestRealCLIsUnderTend(t *testing.T) {
	needProtocol(t)
	gemini := testutil.RealCLI(t, "gemini")
	codex := testutil.RealCLI(t, "codex-acp")
	claude := testutil.RealCLI(t, "claude-code-acp")
	b, err := os.ReadFile("../../examples/agents/acp/tend.toml")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	edit := func(old, new string) {
		t.Helper()
		if !strings.Contains(conf, old) {
			t.Fatalf("examples/agents/acp/tend.toml has no %q", old)
		}
		conf = strings.ReplaceAll(conf, old, new)
	}
	edit(`command = ["gemini", "--experimental-acp"]`, "command = "+command(gemini))
	edit(`command = ["codex-acp"]`, "command = "+command(codex))
	edit(`command = ["claude-code-acp"]`, "command = "+command(claude))
	asUser := os.Geteuid() == 0
	if asUser {
		name := testutil.AgentUser(t)
		readableBy(t, name, claude[0])
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		edit(`# user = "agent"`, fmt.Sprintf("user = %q\ncwd = %q", name, u.HomeDir))
		conf += fmt.Sprintf("\n[program.claude-root]\ncommand = %s\nprotocol = \"acp\"\n", command(claude))
	}
	f := up(t, conf)

	fatal := func(id, reason string, methods ...string) {
		t.Helper()
		st := f.await(t, id, "fatal", func(s program.Status) bool { return s.State == program.StateFatal })
		t.Logf("%s: %s, why %q", id, st.State, st.Why)
		for _, w := range append([]string{"the agent needs authentication", reason}, methods...) {
			if !strings.Contains(st.Why, w) {
				t.Errorf("%s: why %q lacks %q", id, st.Why, w)
			}
		}
	}
	fatal("gemini:0", "Gemini API key is missing or not configured.", "oauth-personal", "gemini-api-key", "vertex-ai", "gateway")
	fatal("codex:0", "Authentication required", "chatgpt", "codex-api-key", "openai-api-key")

	f.await(t, "claude:0", "ready", func(s program.Status) bool { return s.State == program.StateRunning && s.Ready })
	if asUser {
		// A crash (it backs off and tries again: only authentication is
		// fatal at once), whose why carries the agent's own reason.
		st := f.await(t, "claude-root:0", "failing session/new", func(s program.Status) bool {
			return s.State == program.StateBackoff && strings.Contains(s.Why, "Internal error")
		})
		t.Logf("claude-root:0: %s, why %q", st.State, st.Why)
		if want := "session/new failed: Internal error"; !strings.Contains(st.Why, want) {
			t.Errorf("claude-code-acp as root: why %q lacks %q", st.Why, want)
		}
		if want := "the agent said: --dangerously-skip-permissions cannot be used with root/sudo privileges"; !strings.Contains(st.Why, want) {
			t.Errorf("claude-code-acp as root: why %q lacks %q", st.Why, want)
		}
		if logs := f.logs("claude-root:0"); !strings.Contains(logs, "cannot be used with root/sudo privileges") {
			t.Errorf("the log of claude-code-acp as root (why %q) lacks its reason:\n%s", st.Why, logs)
		}
	}
	out, err := f.tend("prompt", "claude:0", "say hello")
	if strings.Contains(out, "unknown command") {
		t.Skipf("this tend has no prompt verb yet: %s", out)
	}
	t.Logf("tend prompt claude:0: %v: %s", err, out)
	if err == nil || !strings.Contains(out, "Authentication required") {
		t.Errorf("tend prompt to claude-code-acp without a login: %v, want a failure naming \"Authentication required\":\n%s", err, out)
	}
}
