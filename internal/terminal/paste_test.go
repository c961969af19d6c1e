package terminal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// issuePaste is the paste of docs/trust.md (vt's paste tests have it
// too): one pass removing the end marker leaves "ESC[201~" behind, ending
// the paste, and what follows is typed, newline and all.
const issuePaste = "harmless \x1b[20\x1b[201~1~; touch "

// TestPasteCannotEndItselfInBash pastes the text of docs/trust.md into a
// real bash, which turns bracketed paste on: an end marker in the text
// would end the paste and the newline after it would run touch.
func TestPasteCannotEndItselfInBash(t *testing.T) {
	bash := lookPath(t, "bash")
	r := startRun(t, vt.Size{Cols: 100, Rows: 24}, bash, "--norc", "--noprofile")
	r.settle(contains("$"))
	if !r.screenPaste() {
		t.Skip("this bash does not turn on bracketed paste")
	}
	victim := filepath.Join(t.TempDir(), "x")
	if err := r.term.Send(vt.Input{Text: issuePaste + victim + "\n"}); err != nil {
		t.Fatal(err)
	}
	r.settle(contains("touch"))
	// Bash reads its input in order: once a line typed after the paste
	// has run, the paste has been read whole. C-a C-k empty the line
	// (readline keeps a paste's newlines in the one line it edits).
	if err := r.term.Send(vt.Input{Keys: append([]string{"C-a", "C-k"}, append(typed("echo after-$((6*7))"), "Enter")...)}); err != nil {
		t.Fatal(err)
	}
	r.settle(contains("after-42"))
	if _, err := os.Stat(victim); err == nil {
		t.Fatalf("the paste ended itself and bash ran touch; screen:\n%s", r.term.Text())
	}
	if scr := r.term.Text(); strings.Contains(scr, "harmless: command not found") {
		t.Fatalf("bash ran the pasted line:\n%s", scr)
	}
}

// screenPaste says whether the program has bracketed paste on, waiting a
// little for it: bash turns it on with its first prompt.
func (r *run) screenPaste() bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var on bool
		r.term.View(func(s *vt.Screen) { on = s.BracketedPaste() })
		if on {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
