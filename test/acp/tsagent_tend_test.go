package acptest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// prompt runs tend prompt and wants it to succeed with an answer holding
// want.
func (f *fleet) prompt(t *testing.T, id, words, want string) {
	t.Helper()
	out, err := f.tend("prompt", id, words)
	if strings.Contains(out, "unknown command") {
		t.Skipf("this tend has no prompt verb yet: %s", out)
	}
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("tend prompt %s %q: %v, want an answer with %q:\n%s\nlogs:\n%s", id, words, err, want, out, f.logs(id))
	}
}

// TestTSAgentUnderTendResumes: the TypeScript-SDK agent under tend keeps
// its conversation across a SIGKILL of its run and a SIGKILL of the daemon:
// each new run (or the daemon that finds the run again) continues the
// session, and the next answer names every earlier prompt.
func TestTSAgentUnderTendResumes(t *testing.T) {
	needProtocol(t)
	argv := testutil.TSAgent(t)
	f := up(t, fmt.Sprintf("[daemon]\nstate_dir = \".tend\"\n\n[program.ts]\ncommand = %s\nprotocol = \"acp\"\n", command(argv)))
	ready := func(s program.Status) bool { return s.State == program.StateRunning && s.Ready }
	st := f.await(t, "ts:0", "ready", ready)

	f.prompt(t, "ts", "the sky is green", `turn 1; nothing said before; you say now: "the sky is green".`)
	f.prompt(t, "ts:0", "my cat is Tom", `turn 2; you said before: "the sky is green"; you say now: "my cat is Tom".`)

	if st.PID == nil {
		t.Fatal("a ready run without a pid")
	}
	if err := syscall.Kill(*st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run := st.Run
	st = f.await(t, "ts:0", "ready in a new run", func(s program.Status) bool { return ready(s) && s.Run > run })
	f.prompt(t, "ts:0", "what did I say?", `turn 3; you said before: "the sky is green", "my cat is Tom"; you say now: "what did I say?".`)

	f.crash(t)
	f.start(t)
	f.await(t, "ts:0", "ready under the new daemon", ready)
	f.prompt(t, "ts:0", "and now?", `turn 4; you said before: "the sky is green", "my cat is Tom", "what did I say?"; you say now: "and now?".`)
}
