package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/testutil"
)

// TestScreenHistoryAndTheLog: a real daemon keeps what scrolled off a tty
// run's screen (tty_history's default), `tend screen --history N` prints
// it above the screen as tmux capture-pane -S -N does, and the log follows
// the cursor's moves along a line as the screen does.
func TestScreenHistoryAndTheLog(t *testing.T) {
	tend, conf, c := terminalFleet(t)
	screenShows(t, c, "shell:0", "tend$")
	if code, _, errb := tendRun(t, tend, "-c", conf, "send", "shell:0", `i=1; while [ $i -le 60 ]; do echo "row $i"; i=$((i+1)); done; printf 'a\033[10Gb\033[20Gc\n'`, "--enter"); code != 0 {
		t.Fatalf("send: exit %d %s", code, errb)
	}
	screenShows(t, c, "shell:0", "row 60\na        b         c\ntend$")

	code, out, errb := tendRun(t, tend, "-c", conf, "screen", "shell:0", "--history", "100")
	var want strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&want, "row %d\n", i)
	}
	if code != 0 || !strings.Contains(out, want.String()+"a        b         c\ntend$") {
		t.Errorf("screen --history 100: exit %d %s\n%s", code, errb, out)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) <= 24 {
		t.Errorf("screen --history 100 printed %d lines", len(lines))
	}
	code, out, _ = tendRun(t, tend, "-c", conf, "screen", "shell:0", "--history", "2", "--json")
	if code != 0 || !strings.Contains(out, `"history": [`) {
		t.Errorf("screen --history 2 --json: exit %d\n%s", code, out)
	}

	var logs string
	testutil.Eventually(t, "the line in the log", func() bool {
		_, logs, _ = tendRun(t, tend, "-c", conf, "logs", "shell:0")
		return strings.Contains(logs, "a        b         c")
	}, testutil.Explain(func() string { return logs }))
}
