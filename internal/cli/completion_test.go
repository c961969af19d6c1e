package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "__start_tend",
		"zsh":  "#compdef tend",
		"fish": "complete -c tend",
	} {
		r := run(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, marker) || !strings.Contains(r.stdout, "__complete") {
			t.Errorf("completion %s: exit %d, stderr %q, no %q in the script", shell, r.code, r.stderr, marker)
		}
	}
	run(t, "completion", "tcsh").wantErr(t, 2, `invalid argument "tcsh"`)
	run(t, "completion").wantErr(t, 2, "accepts 1 arg")
}

// complete runs what a completion script runs for "tend ARGS<TAB>" and
// returns the candidates (the last line is the directive).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	r := run(t, append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	return lines[:len(lines)-1]
}

func TestCompleteIDs(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	if got, want := complete(t, "--socket", d.sock, "restart", ""), []string{"all", "planner", "web", "planner:0", "web:0", "web:1"}; !slices.Equal(got, want) {
		t.Errorf("restart <TAB> = %q, want %q", got, want)
	}
	if got, want := complete(t, "--socket", d.sock, "status", "we"), []string{"web", "web:0", "web:1"}; !slices.Equal(got, want) {
		t.Errorf("status we<TAB> = %q, want %q", got, want)
	}
	if got, want := complete(t, "--socket", d.sock, "rm", ""), []string{"planner", "web"}; !slices.Equal(got, want) {
		t.Errorf("rm <TAB> = %q, want %q", got, want)
	}
	for _, verb := range []string{"screen", "send", "attach"} {
		if got, want := complete(t, "--socket", d.sock, verb, "pl"), []string{"planner", "planner:0"}; !slices.Equal(got, want) {
			t.Errorf("%s pl<TAB> = %q, want %q", verb, got, want)
		}
	}
	if got := complete(t, "notify", "--turn", ""); !slices.Equal(got, []string{"active", "idle"}) {
		t.Errorf("notify --turn <TAB> = %q", got)
	}
	if got := complete(t, "--socket", d.sock, "status", "web:0", ""); len(got) != 0 {
		t.Errorf("a second argument completes %q", got)
	}
	if got := complete(t, "wait", "web", "--until", "st"); !slices.Equal(got, []string{"starting", "stopping", "stopped"}) {
		t.Errorf("--until st<TAB> = %q", got)
	}
	if got := complete(t, "res"); len(got) != 1 || !strings.HasPrefix(got[0], "restart") {
		t.Errorf("res<TAB> = %q", got)
	}

	// No daemon: nothing, quietly, and no exit status to speak of.
	gone := filepath.Join(shortDir(t), "tend.sock")
	r := run(t, "__complete", "--socket", gone, "stop", "")
	if r.code != 0 || strings.Contains(r.stdout, "web") || strings.Contains(r.stderr, "no tend daemon") {
		t.Errorf("completion without a daemon: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// The committed man pages are what the command tree makes: `go generate
// ./cmd/tend` after changing a verb.
func TestManPagesUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "man")
	pages := manPages((&env{ctx: t.Context(), stdout: os.Stdout, stderr: os.Stderr}).rootCmd(""))
	names, _ := filepath.Glob(filepath.Join(dir, "tend*.1"))
	if len(names) != len(pages) {
		t.Errorf("docs/man has %d pages, the tree makes %d: run go generate ./cmd/tend", len(names), len(pages))
	}
	for name, text := range pages {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != text {
			t.Errorf("docs/man/%s is not what the tree makes (%v): run go generate ./cmd/tend", name, err)
		}
	}
	for _, verb := range []string{"start", "stop", "restart", "scale", "wait", "completion", "ps", "status"} {
		if _, ok := pages["tend-"+verb+".1"]; !ok {
			t.Errorf("no page for %s", verb)
		}
	}
	if _, ok := pages["tend-man.1"]; ok {
		t.Errorf("the hidden man verb has a page")
	}
	if p := pages["tend-restart.1"]; !strings.Contains(p, `\fB\-\-rolling\fR`) || !strings.Contains(p, ".SH EXIT STATUS") {
		t.Errorf("tend-restart.1:\n%s", p)
	}
}

func TestManVerb(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tend-gone.1"), "stale")
	writeFile(t, filepath.Join(dir, "other.1"), "not ours")
	run(t, "man", dir).want(t, 0, "")
	if _, err := os.Stat(filepath.Join(dir, "tend-gone.1")); !os.IsNotExist(err) {
		t.Errorf("a stale page stays: %v", err)
	}
	for _, name := range []string{"other.1", "tend.1", "tend-ps.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}
