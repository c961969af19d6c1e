package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The real agent CLIs whose screens internal/terminal's comparison tests
// draw under tend and under tmux: Claude Code and Codex pinned in test/tui
// (npm ci --prefix test/tui --ignore-scripts), Gemini CLI in test/acp/clis.

// TUIDir is the repository's test/tui directory, found from this file's own
// path so any package's test can reach it.
func TUIDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("test", "tui")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "tui")
}

// AgentTUI is the argv that starts a real agent CLI in its interactive
// terminal interface: "claude" (Claude Code), "codex" (Codex) or "gemini"
// (Gemini CLI). It skips the test (fails it under TEND_REQUIRE_TOOLS=1)
// saying how to install what is missing.
func AgentTUI(t testing.TB, name string) []string {
	t.Helper()
	switch name {
	case "claude":
		// The native binary itself: with --ignore-scripts the package's
		// postinstall never copies it over bin/claude.exe, a stub that only
		// says so.
		arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
		bin, err := filepath.Abs(filepath.Join(TUIDir(), "node_modules", "@anthropic-ai", "claude-code-linux-"+arch, "claude"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(bin); err != nil {
			Missing(t, "Claude Code is not installed (npm ci --prefix %s --ignore-scripts)", TUIDir())
		}
		return []string{bin}
	case "codex":
		node := NeedTool(t, "node")
		bin, err := filepath.Abs(filepath.Join(TUIDir(), "node_modules", "@openai", "codex", "bin", "codex.js"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(bin); err != nil {
			Missing(t, "Codex is not installed (npm ci --prefix %s --ignore-scripts)", TUIDir())
		}
		return []string{node, bin}
	case "gemini":
		// A node script: run by the node RealCLI checked, whatever PATH the
		// test gives it.
		return []string{NeedTool(t, "node"), RealCLI(t, "gemini")[0]}
	}
	t.Fatalf("AgentTUI: no agent CLI named %q", name)
	return nil
}
