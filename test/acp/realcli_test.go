package acptest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// needProtocol skips the test while this tend's config does not know
// protocol = "acp" (docs/protocol.md): the tests of the real CLIs under tend
// start running the day it does.
func needProtocol(t *testing.T) {
	t.Helper()
	if _, err := config.ParseTOML("tend.toml", []byte("[program.a]\ncommand = [\"a\"]\nprotocol = \"acp\"\n")); err != nil {
		t.Skipf("this tend does not speak ACP yet (protocol = \"acp\": %v)", err)
	}
}

// tendBin builds tend once per test binary.
var tendBin = func() func(t *testing.T) string {
	var path string
	var err error
	var out []byte
	built := false
	return func(t *testing.T) string {
		t.Helper()
		if !built {
			built = true
			dir, e := os.MkdirTemp("", "tendbin")
			if e != nil {
				t.Fatal(e)
			}
			path = filepath.Join(dir, "tend")
			cmd := exec.Command("go", "build", "-o", path, "./cmd/tend")
			cmd.Dir = "../.."
			out, err = cmd.CombinedOutput()
		}
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return path
	}
}()

// fleet is a tend up in a temporary directory.
type fleet struct {
	dir, bin string
	env      []string
	c        *client.Client
	out      *testutil.Buffer
}

// agentEnv is the environment of tend up and so of its agents: the test's,
// without anything that could log an agent in (API keys, Google Cloud
// settings) and with a fresh HOME, so the agents meet a machine no one has
// logged in on, as a new operator's would be.
func agentEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(k, "_API_KEY"), strings.HasPrefix(k, "GOOGLE_"), strings.HasPrefix(k, "GEMINI_"),
			strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "CLAUDE_"), strings.HasPrefix(k, "OPENAI_"),
			strings.HasPrefix(k, "CODEX_"), k == "HOME", k == "XDG_CONFIG_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "GORACE=atexit_sleep_ms=10")
}

// up runs tend up with conf as its tend.toml in a short temporary
// directory (socket paths must fit in 108 bytes).
func up(t *testing.T, conf string) *fleet {
	t.Helper()
	bin := tendBin(t)
	dir, err := os.MkdirTemp("", "tendacp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tend.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fleet{dir: dir, bin: bin, env: agentEnv(home), out: &testutil.Buffer{}}
	cmd := exec.Command(bin, "up")
	cmd.Dir, cmd.Env = dir, f.env
	cmd.Stdout, cmd.Stderr = f.out, f.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		down := exec.Command(bin, "down")
		down.Dir, down.Env = dir, f.env
		down.Run()
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Error("tend up did not stop on tend down")
		}
		if t.Failed() {
			t.Logf("tend up said:\n%s", f.out.String())
		}
	})
	f.c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
	testutil.Eventually(t, "tend up to serve", func() bool {
		select {
		case <-exited:
			t.Fatalf("tend up ended:\n%s", f.out.String())
		default:
		}
		_, err := f.c.Health()
		return err == nil
	})
	return f
}

// tend runs a tend verb in the fleet's directory.
func (f *fleet) tend(args ...string) (string, error) {
	cmd := exec.Command(f.bin, args...)
	cmd.Dir, cmd.Env = f.dir, f.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// logs is what tend logs shows of id (the transcript and the agent's
// stderr), for failure messages.
func (f *fleet) logs(id string) string {
	out, err := f.tend("logs", id)
	if err != nil {
		return fmt.Sprintf("tend logs %s: %v\n%s", id, err, out)
	}
	return out
}

// await waits for id's status to satisfy cond, and returns it.
func (f *fleet) await(t *testing.T, id, what string, cond func(program.Status) bool) program.Status {
	t.Helper()
	var last program.Status
	var lastErr error
	// The CLIs are big node bundles: a start takes seconds on a busy machine.
	testutil.Eventually(t, id+" to be "+what, func() bool {
		last, lastErr = f.c.Status(id)
		return lastErr == nil && cond(last)
	}, testutil.Within(2*testutil.Deadline), testutil.Every(100*time.Millisecond), testutil.Explain(func() string {
		return fmt.Sprintf("last status: state %q, ready %v, why %q (err %v)\nlogs:\n%s", last.State, last.Ready, last.Why, lastErr, f.logs(id))
	}))
	return last
}

func command(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// readableBy fails (or skips) the test when name cannot run path: its
// checkout may be in a directory only root can enter.
func readableBy(t *testing.T, name, path string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command("/bin/sh", "-c", `test -r "$1" && test -x "$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := cmd.Run(); err != nil {
		testutil.Missing(t, "user %s cannot run %s (a checkout other users cannot enter?): %v", name, path, err)
	}
}

// TestRealCLIsUnderTend: each real agent CLI from npm, started by
// examples/agents/acp/tend.toml (protocol = "acp") on a machine where no
// one has logged in, reaches the state test/acp/README.md documents. Gemini
// CLI and codex-acp refuse session/new: the instance is fatal at once, why
// naming the agent's own reason and its methods. claude-code-acp as another
// user opens a session (it checks the login only at the prompt): ready, and
// a prompt fails with its reason. claude-code-acp as root fails
// session/new, and its stderr, in the log, says why.
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
		st := f.await(t, "claude-root:0", "failing session/new", func(s program.Status) bool {
			return strings.Contains(s.Why, "Internal error")
		})
		t.Logf("claude-root:0: %s, why %q", st.State, st.Why)
		if logs := f.logs("claude-root:0"); !strings.Contains(logs, "cannot be used with root/sudo privileges") {
			t.Errorf("the log of claude-code-acp as root (why %q) lacks its reason:\n%s", st.Why, logs)
		}
	}
	out, err := f.tend("prompt", "claude:0", "say hello")
	if strings.Contains(out, "unknown command") {
		t.Skipf("this tend has no prompt verb yet: %s", out)
	}
	if err == nil || !strings.Contains(out, "Authentication required") {
		t.Errorf("tend prompt to claude-code-acp without a login: %v, want a failure naming \"Authentication required\":\n%s", err, out)
	}
}
