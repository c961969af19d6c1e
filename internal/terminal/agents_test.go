package terminal

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// The real agent CLIs from npm (test/tui, test/acp/clis) under our
// terminal and under tmux. Offline they still draw their first screens, a
// sign-in menu, a trust prompt or an "unable to connect" notice, and those
// must agree. Each side gets a HOME of its own, fresh, so neither reads
// this machine's config nor what the other side wrote; both share one
// working directory, as its path shows on some screens. Both go through a
// proxy no one listens at (agentProxy), so the screens are the offline
// ones on a machine with a network too, as on CI.

// agentProxy is where the CLIs' HTTP goes: the discard port of loopback,
// where nothing listens, so each connection is refused at once.
const agentProxy = "http://127.0.0.1:9"

// agentStep is keys typed into both sides (tmux's key names), after which
// the screens are compared once both satisfy want and have stood still.
type agentStep struct {
	keys []string
	want func(string) bool
}

// stillFor polls read until what it returns satisfies ok and has not
// changed for half a second, and returns it: an agent CLI redraws in bursts
// (a transient notice, a resize-driven repaint), and only a settled screen
// says what it meant to show.
func stillFor(t *testing.T, what string, read func() string, ok func(string) bool) string {
	t.Helper()
	const still = 500 * time.Millisecond
	deadline := time.Now().Add(60 * time.Second)
	last, since := "", time.Now()
	for time.Now().Before(deadline) {
		cur := read()
		if cur != last {
			last, since = cur, time.Now()
		} else if ok(cur) && time.Since(since) >= still {
			return cur
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never settled; last:\n%s", what, last)
	return ""
}

// checkAgent runs argv under a Terminal with a fresh HOME, types the steps
// into it, and at the start and after each step, once the screen has
// settled on what the step wants, compares it with tmux's capture of the
// same bytes replayed (the emulators judged on identical input). With
// live, the program runs under tmux too, driven by the same keys, and the
// two settled screens and cursors must agree as well: for a program whose
// output does not depend on timing. tail is a shell command run in the
// tmux pane after the program ends, for a program that draws its screen
// and exits: the pane stays as the program left it, as our Terminal's
// screen does.
func checkAgent(t *testing.T, size vt.Size, argv []string, live bool, tail string, first func(string) bool, steps []agentStep) {
	t.Helper()
	m := newTmux(t)
	dir := t.TempDir()
	env := func(home string) []string {
		var e []string
		for _, kv := range programEnv() {
			if !strings.HasPrefix(kv, "HOME=") {
				e = append(e, kv)
			}
		}
		return append(e, "HOME="+home, "HTTPS_PROXY="+agentProxy, "https_proxy="+agentProxy,
			"HTTP_PROXY="+agentProxy, "http_proxy="+agentProxy, "ALL_PROXY="+agentProxy, "NO_PROXY=", "no_proxy=")
	}
	ours, theirs := t.TempDir(), t.TempDir()
	killLeftBehind(t, ours, theirs)
	r := startRunIn(t, size, env(ours), dir, argv...)
	if live {
		var line []string
		for _, kv := range env(theirs) {
			line = append(line, shellQuote(kv))
		}
		for _, a := range argv {
			line = append(line, shellQuote(a))
		}
		cmd := "cd " + shellQuote(dir) + " && exec env -i " + strings.Join(line, " ")
		if tail != "" {
			cmd = "cd " + shellQuote(dir) + " && env -i " + strings.Join(line, " ") + "; " + tail
		}
		m.start("agent", size, cmd)
	}
	checkpoint := 0
	compare := func(what string, want func(string) bool) {
		t.Helper()
		ours := stillFor(t, "our screen", r.term.Text, want)
		// The same bytes in tmux: taken once the screen stood still, so the
		// screen is theirs (a late redraw, and the live screen is checked
		// against the bytes fed at once, which would differ).
		data := r.output()
		fed := vt.NewScreen(size)
		fed.Feed(data)
		if now := r.term.Text(); now != fed.Text() {
			t.Fatalf("%s: the live screen differs from the same bytes fed at once:\n%s", what, diffScreens(fed.Text(), now))
		}
		checkpoint++
		if d := m.compareReplay(fmt.Sprintf("replay%d", checkpoint), size, data, fed); d != "" {
			t.Fatalf("%s: replayed output: %s\nours:\n%s", what, d, ours)
		}
		if !live {
			return
		}
		sameScreens(t, what, m, "agent", r,
			func() string { return stillFor(t, "tmux's pane", func() string { return m.Capture("agent") }, want) },
			func() string { return stillFor(t, "our screen", r.term.Text, want) })
	}
	compare("start", first)
	for i, st := range steps {
		if live {
			m.Must(append([]string{"send-keys", "-t", "agent"}, st.keys...)...)
		}
		if err := r.term.Send(vt.Input{Keys: st.keys}); err != nil {
			t.Fatal(err)
		}
		compare(fmt.Sprintf("step %d (%v)", i, st.keys), st.want)
	}
}

func TestCodexMatchesTmux(t *testing.T) {
	argv := testutil.AgentTUI(t, "codex")
	checkAgent(t, vt.Size{Cols: 80, Rows: 24}, argv, true, "", contains("> 1. Sign in with ChatGPT"), []agentStep{
		{keys: []string{"Down"}, want: contains("> 2. Sign in with Device Code")},
		{keys: []string{"Down"}, want: contains("> 3. Sign in another way")},
		{keys: []string{"Enter"}, want: contains("> 1. Use an OpenAI API key")},
		{keys: []string{"Down"}, want: contains("> 2. Use Amazon Bedrock")},
		{keys: []string{"Escape"}, want: contains("Choose how you want to use Codex")},
	})
}

func TestGeminiMatchesTmux(t *testing.T) {
	argv := testutil.AgentTUI(t, "gemini")
	// Not live: what Gemini CLI draws depends on timing (which of its
	// startup notices and tips are out when its Ink renderer repaints,
	// below the trust prompt, after a key), so two runs side by side drew
	// different screens, 1 in 15, and only the replay of its bytes judges
	// our terminal.
	checkAgent(t, vt.Size{Cols: 80, Rows: 24}, argv, false, "", contains("● 1. Trust folder"), []agentStep{
		{keys: []string{"Down"}, want: contains("● 2. Trust parent folder")},
		{keys: []string{"Down"}, want: contains("● 3. Don't trust")},
		{keys: []string{"Enter"}, want: contains("● 1. Sign in with Google")},
		{keys: []string{"Down"}, want: contains("● 2. Use Gemini API Key")},
	})
}

func TestClaudeCodeMatchesTmux(t *testing.T) {
	argv := testutil.AgentTUI(t, "claude")
	// Offline it says it cannot reach its API ("ECONNREFUSED", through
	// agentProxy) and exits; the pane stays.
	checkAgent(t, vt.Size{Cols: 80, Rows: 24}, argv, true, "exec sleep 3600", contains("supported-countries"), nil)
}

// killLeftBehind ends, once the test is over, whatever still runs from one
// of the agents' HOMEs: Codex starts an app-server daemon of its own from
// ~/.codex that outlives the CLI. Only a process our agent started runs
// from there.
func killLeftBehind(t *testing.T, homes ...string) {
	t.Cleanup(func() {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
			if err != nil {
				continue
			}
			for _, h := range homes {
				if strings.HasPrefix(exe, h+"/") {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
}
