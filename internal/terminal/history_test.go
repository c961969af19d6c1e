package terminal

import (
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// History against tmux with a live program (the emulator's own history
// tests, replaying bytes, are vt's).

// TestHistoryOfAProgramMatchesTmux: a real program scrolls 2,600 lines
// through our Terminal (tty_history 2000) and through a tmux pane
// (history-limit 2000, tmux's default); capture-pane -S -2000 and ours
// agree, and again after both are narrowed and widened.
func TestHistoryOfAProgramMatchesTmux(t *testing.T) {
	size := vt.Size{Cols: 80, Rows: 24}
	m := newTmux(t)
	m.SetHistoryLimit(2000)
	sh := lookPath(t, "sh")
	r := startRun(t, size, sh)
	r.term.View(func(s *vt.Screen) { s.SetHistory(2000) }) // before anything scrolls: sh has drawn a prompt at most
	var line []string
	for _, kv := range programEnv() {
		line = append(line, shellQuote(kv))
	}
	m.start("live", size, "cd "+shellQuote(r.cmd.Dir)+" && exec env -i "+strings.Join(line, " ")+" "+shellQuote(sh))
	m.Stable("live", contains("$"))
	r.settle(contains("$"))
	cmd := `i=1; while [ $i -le 2600 ]; do echo "line $i of a program's output"; i=$((i+1)); done; echo done`
	m.Must("send-keys", "-t", "live", "-l", cmd)
	m.Must("send-keys", "-t", "live", "Enter")
	if err := r.term.Send(vt.Input{Text: cmd, Keys: []string{"Enter"}}); err != nil {
		t.Fatal(err)
	}
	compare := func(what string) {
		t.Helper()
		var d string
		for range 10 {
			m.Stable("live", contains("done\n$"))
			r.settle(contains("done\n$"))
			want, wx, wy := m.CaptureAll("live", 2000)
			var ours string
			var x, y int
			r.term.View(func(s *vt.Screen) { ours = testutil.CaptureOf(s, 2000); x, y = s.Cursor() })
			if d = diffScreens(want, ours); d == "" && x == wx && y == wy {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: capture -S -2000 differs from tmux:\n%s", what, d)
	}
	compare("after 2,600 lines")
	for _, sz := range []vt.Size{{Cols: 40, Rows: 24}, {Cols: 80, Rows: 24}, {Cols: 120, Rows: 30}} {
		m.resizePane("live", sz)
		if err := r.term.Resize(sz); err != nil {
			t.Fatal(err)
		}
		compare("at " + sz.String())
	}
}
