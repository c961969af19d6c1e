package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// The ACP agents tend's protocol tests start (test/acp/README.md): a small
// agent on the official TypeScript SDK, and the real agent CLIs from npm.
// Each finder returns the argv that starts the agent speaking ACP on its
// stdio, or skips the test (fails it under TEND_REQUIRE_TOOLS=1, as .ci/run
// installs them all) saying how to install what is missing.

// ACPDir is the repository's test/acp directory, found from this file's
// own path so any package's test can reach it.
func ACPDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("test", "acp")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "acp")
}

// TSAgent is the argv of test/acp/ts-agent (node agent.js): an ACP agent on
// @agentclientprotocol/sdk that keeps its sessions on disk, in
// $TS_AGENT_SESSIONS or <the session's cwd>/.ts-agent-sessions, and so
// supports session/load after being killed.
func TSAgent(t testing.TB) []string {
	t.Helper()
	node := NeedTool(t, "node")
	dir, err := filepath.Abs(filepath.Join(ACPDir(), "ts-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		Missing(t, "the TypeScript-SDK agent's packages are not installed (npm ci --prefix %s)", dir)
	}
	return []string{node, filepath.Join(dir, "agent.js")}
}

// The real ACP agent CLIs, by the name RealCLI takes: the command npm
// installs and the arguments that make it speak ACP.
var realCLIs = map[string][]string{
	"gemini":          {"gemini", "--experimental-acp"},
	"claude-code-acp": {"claude-code-acp"},
	"codex-acp":       {"codex-acp"},
}

// RealCLI is the argv of a real ACP agent CLI from npm: "gemini" (Gemini
// CLI, gemini --experimental-acp), "claude-code-acp" (Claude Code through
// Zed's adapter) or "codex-acp" (Codex through Zed's adapter). It is looked
// for in test/acp/clis/node_modules/.bin (npm ci --prefix test/acp/clis,
// the versions test/acp/clis/package.json pins), then on PATH (npm install
// -g). The commands are node scripts, so node must be on PATH too.
func RealCLI(t testing.TB, name string) []string {
	t.Helper()
	argv, ok := realCLIs[name]
	if !ok {
		t.Fatalf("RealCLI: no agent CLI named %q", name)
	}
	node := NeedTool(t, "node")
	if v := nodeMajor(node); v < 20 {
		Missing(t, "the agent CLIs need node 20 or later, and %s is %d (.ci/run installs one)", node, v)
	}
	dir, err := filepath.Abs(filepath.Join(ACPDir(), "clis"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", argv[0])
	if _, err := os.Stat(bin); err != nil {
		p, lerr := exec.LookPath(argv[0])
		if lerr != nil {
			Missing(t, "%s is not installed (npm ci --prefix %s)", argv[0], dir)
		}
		bin = p
	}
	return append([]string{bin}, argv[1:]...)
}

// nodeMajor is the major version of the node at path, 0 when it does not say.
func nodeMajor(path string) int {
	out, err := exec.Command(path, "-p", "process.versions.node").Output()
	if err != nil {
		return 0
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), ".")
	n, _ := strconv.Atoi(v)
	return n
}

var agentUsers atomic.Int32 // how many AgentUser made: their names differ

// AgentUser creates a system user with a home directory of its own for the
// test, removed with its home when the test ends, and returns its name:
// claude-code-acp will not work as root, and writes its settings in $HOME.
// It needs root and useradd; without them the test is skipped.
func AgentUser(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running an agent as another user needs root")
	}
	NeedTool(t, "useradd")
	name := fmt.Sprintf("tendacp%d-%d", os.Getpid()%100000, agentUsers.Add(1))
	home := filepath.Join(os.TempDir(), name+"-home")
	out, err := exec.Command("useradd", "--system", "--create-home", "--home-dir", home,
		"--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		t.Skipf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Processes the user left would keep userdel from working; the test
		// that ran them stops them first.
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v: %s", name, err, out)
		}
		os.RemoveAll(home)
	})
	return name
}
