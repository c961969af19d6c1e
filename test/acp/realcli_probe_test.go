package acptest

import (
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/testutil"
)

// authIDs are the ids of the authentication methods an agent offers.
func authIDs(t *testing.T, ms []acp.AuthMethod) []string {
	t.Helper()
	b, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range raw {
		ids = append(ids, m.ID)
	}
	return ids
}

// probe is what test/acp/README.md records of one real CLI, with no
// network needed and no one logged in.
type probe struct {
	cli     string
	auth    []string // the ids of its authMethods
	code    int      // session/new's error code; 0: it opens a session
	message string   // and message
	stderr  string   // what its stderr says meanwhile, if anything
	prompt  string   // with a session: a prompt's error message
}

// TestRealCLIsAnswerAsDocumented drives each real agent CLI from npm with
// the Go SDK's client, as tend does, on a machine where no one has logged
// in: initialize (each offers loadSession and its authMethods), then
// session/new. It pins what test/acp/README.md and the examples in
// examples/agents/acp say, so an upgrade of a CLI that changes them fails
// here first.
func TestRealCLIsAnswerAsDocumented(t *testing.T) {
	probes := []probe{
		{cli: "gemini", auth: []string{"oauth-personal", "gemini-api-key", "vertex-ai", "gateway"},
			code: -32000, message: "Gemini API key is missing or not configured."},
		{cli: "codex-acp", auth: []string{"chatgpt", "codex-api-key", "openai-api-key"},
			code: -32000, message: "Authentication required"},
	}
	if os.Geteuid() == 0 {
		probes = append(probes, probe{cli: "claude-code-acp", auth: []string{"claude-login"},
			code: -32603, message: "Internal error", stderr: "--dangerously-skip-permissions cannot be used with root/sudo privileges"})
	}
	// As anyone but root, claude-code-acp opens a session; it asks for the
	// login at the prompt.
	probes = append(probes, probe{cli: "claude-code-acp as another user", auth: []string{"claude-login"}, prompt: "Authentication required"})

	for _, p := range probes {
		t.Run(p.cli, func(t *testing.T) {
			t.Parallel()
			name, _, asUser := strings.Cut(p.cli, " ")
			argv := testutil.RealCLI(t, name)
			home := t.TempDir()
			dir := home
			var cred *syscall.Credential
			if asUser && os.Geteuid() == 0 {
				cred, home = asAgentUser(t, argv[0])
				dir = home
			}
			a := spawn(t, argv, dir, agentEnv(home), cred)
			init := a.initialize(t)
			if !init.AgentCapabilities.LoadSession {
				t.Errorf("initialize: loadSession false, want true")
			}
			if got := authIDs(t, init.AuthMethods); !slices.Equal(got, p.auth) {
				t.Errorf("initialize: authMethods %q, want %q", got, p.auth)
			}
			s, err := a.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
			if p.code == 0 {
				if err != nil {
					t.Fatalf("session/new: %v, want a session", err)
				}
				_, err := a.conn.Prompt(ctxT(t), acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("say hello")}})
				var re *acp.RequestError
				if !errors.As(err, &re) || re.Message != p.prompt {
					t.Errorf("session/prompt: %v, want error %q", err, p.prompt)
				}
				return
			}
			var re *acp.RequestError
			if !errors.As(err, &re) || re.Code != p.code || re.Message != p.message {
				t.Fatalf("session/new: %v, want error %d %q", err, p.code, p.message)
			}
			if p.stderr != "" {
				testutil.Eventually(t, "stderr to say "+p.stderr, func() bool { return strings.Contains(a.stderr.String(), p.stderr) },
					testutil.Explain(a.stderr.String))
			}
		})
	}
}

// asAgentUser is a fresh user to run an agent as (testutil.AgentUser),
// its credentials and its home.
func asAgentUser(t *testing.T, bin string) (*syscall.Credential, string) {
	t.Helper()
	name := testutil.AgentUser(t)
	readableBy(t, name, bin)
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, filepath.Clean(u.HomeDir)
}
