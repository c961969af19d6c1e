package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// A tty run that ended before the daemon was killed outright: the next
// daemon shows its last screen (rebuilt from the run's log), not running,
// at tty_size, and not an earlier run's.
func TestTerminalEndedBeforeARestartKeepsItsScreen(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	// The first run's bytes are in the log before the second's, which
	// ends fatal.
	conf := `
[program.gone]
shell = '''if [ -e ` + marker + ` ]; then printf 'second run\n\033[1mlast words\033[0m\nexit> '; exit 3; fi
: > ` + marker + `; printf 'first run\n'; exit 1'''
tty = true
tty_size = "50x6"
restart = "on-failure"
backoff_initial = "100ms"
max_crashes = 5
fatal_exit_codes = [3]
`
	c, killUp := upChild(t, dir, conf)
	defer killUp()
	var before program.Screen
	testutil.Eventually(t, "the second run to end, for good", func() bool {
		st, err := c.Status("gone:0")
		if err != nil || st.PID != nil || (st.State != program.StateFatal && st.State != program.StateExited) {
			return false
		}
		before, err = c.Screen("gone:0", false)
		return err == nil && strings.Contains(strings.Join(before.Lines, "\n"), "last words")
	})
	// The intent record has the ended run's start (the journal is written
	// at once, not synced).
	testutil.Eventually(t, "the intent record of the ended run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, ".tend", kept.IntentFile+".log"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"id":"gone:0"`) && strings.Contains(l, `"last_start"`) && strings.Contains(l, `"state":"fatal"`) {
				return true
			}
		}
		return false
	}, testutil.Explain(func() string {
		b, _ := os.ReadFile(filepath.Join(dir, ".tend", kept.IntentFile+".log"))
		return string(b)
	}))
	killUp()

	c2, d, _ := startDaemonSeen(t, dir, conf)
	if st, err := c2.Status("gone:0"); err != nil || st.PID != nil {
		t.Fatalf("gone:0 after the restart: %+v %v", st, err)
	}
	after, err := c2.Screen("gone:0", false)
	if err != nil {
		t.Fatalf("the screen after the restart: %v", err)
	}
	if after.Running || after.Cols != 50 || after.Rows != 6 {
		t.Errorf("the screen after the restart: running %v, %dx%d", after.Running, after.Cols, after.Rows)
	}
	if got, want := strings.Join(after.Lines, "\n"), strings.Join(before.Lines, "\n"); got != want {
		t.Errorf("the screen after the restart\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(screenText(t, d, "gone:0"), "first run") {
		t.Errorf("an earlier run's bytes in the last screen:\n%s", screenText(t, d, "gone:0"))
	}
}
