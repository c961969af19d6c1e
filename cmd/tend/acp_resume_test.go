package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Protocol agents with tend-acp-agent (acpagent_test.go): an ACP agent on
// the Go SDK that offers loadSession and answers "echo N: TEXT", N the
// prompt's place in its session, so an answer says whether the session
// went on.

func acpAgentConf(t *testing.T, extra string, env ...string) string {
	t.Helper()
	return fmt.Sprintf("[program.echo]\ncommand = [%q]\nprotocol = \"acp\"\nenv = { ACP_STATE = %q%s }\n%s\n",
		helperBinary(t, "tend-acp-agent"), filepath.Join(t.TempDir(), "sessions.json"), strings.Join(append([]string{""}, env...), ", "), extra)
}

// promptOK runs tend prompt and returns what it printed; anything but
// exit 0 fails the test.
func promptOK(t *testing.T, tend, sock, id, text string) string {
	t.Helper()
	code, out, errOut := tendRun(t, tend, "--socket", sock, "prompt", id, text)
	if code != 0 {
		t.Fatalf("tend prompt %s %q: exit %d\n%s%s", id, text, code, out, errOut)
	}
	return out
}

// TestACPResumeAfterRunKill: a run SIGKILLed from outside is a crash; the
// next run continues the same session with session/load.
func TestACPResumeAfterRunKill(t *testing.T) {
	tend, dir, c := acpFleet(t, acpAgentConf(t, `backoff_initial = "100ms"`))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	st := idleACP(t, c, "echo:0")
	if out := promptOK(t, tend, sock, "echo:0", "one"); !strings.Contains(out, "echo 1: one") {
		t.Fatalf("first answer: %q", out)
	}
	syscall.Kill(*st.PID, syscall.SIGKILL)
	testutil.Eventually(t, "the next run", func() bool {
		s, err := c.Status("echo:0")
		return err == nil && s.Run == st.Run+1 && s.Ready
	}, testutil.Explain(eventsOf(c)))
	st2 := idleACP(t, c, "echo:0")
	if st2.SessionID != st.SessionID {
		t.Errorf("session %q after the crash, %q before", st2.SessionID, st.SessionID)
	}
	if out := promptOK(t, tend, sock, "echo:0", "two"); !strings.Contains(out, "echo 2: two") {
		t.Errorf("the answer after the crash does not go on from the session: %q", out)
	}
	if _, logs, _ := tendRun(t, tend, "--socket", sock, "logs", "echo:0"); !strings.Contains(logs, "[session] continued "+st.SessionID) || strings.Contains(logs, "(history:") {
		t.Errorf("the transcript:\n%s", logs)
	}
}

// TestACPResumeAfterDaemonKill: a daemon SIGKILLed and started again
// adopts the run, opens its stdin and stdout FIFOs again and goes on with
// the same session in the same process: no new handshake.
func TestACPResumeAfterDaemonKill(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, acpAgentConf(t, "", `ACP_MODE = "slow"`, `ACP_DELAY = "1m"`))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	c := client.New(sock)
	up := startUp(t, tend, conf)
	st := idleACP(t, c, "echo:0")
	if out := promptOK(t, tend, sock, "echo:0", "one"); !strings.Contains(out, "echo 1: one") {
		t.Fatalf("first answer: %q", out)
	}
	// A turn under way at the kill: the next daemon cannot be answered it.
	inFlight, err := c.Prompt("echo:0", "slow two")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the slow turn under way", func() bool {
		s, err := c.Status("echo:0")
		return err == nil && s.TurnActive
	}, testutil.Explain(eventsOf(c)))
	killUp(t, up, up.Process.Pid, map[string]int{"echo:0": *st.PID})
	up = startUp(t, tend, conf)
	st2 := idleACP(t, c, "echo:0")
	if *st2.PID != *st.PID || st2.SessionID != st.SessionID {
		t.Errorf("after the daemon kill: pid %d session %q, before pid %d session %q", *st2.PID, st2.SessionID, *st.PID, st.SessionID)
	}
	evs := auditEventsEventually(t, filepath.Join(dir, ".tend"), func(evs []program.Event) bool {
		for _, e := range find(evs, program.KindTurn, "echo:0") {
			if tr := e.Data.(*program.Turn); tr.PromptID == inFlight && tr.Phase == program.PhaseTurnEnded {
				return true
			}
		}
		return false
	})
	for _, e := range find(evs, program.KindTurn, "echo:0") {
		if tr := e.Data.(*program.Turn); tr.PromptID == inFlight && tr.Phase == program.PhaseTurnEnded && tr.StopReason != program.StopRunEnded {
			t.Errorf("the turn under way at the kill ended %q", tr.StopReason)
		}
	}
	// The agent was told session/cancel and answered the old daemon's
	// request: that answer is not taken for this daemon's.
	if out := promptOK(t, tend, sock, "echo:0", "three"); !strings.Contains(out, "echo 3: three") {
		t.Errorf("the answer after the daemon kill: %q", out)
	}
	// And again: the daemon that came up kept the run's FIFOs (its stdin's
	// too), so the next one opens them as this one did.
	if _, err := os.Stat(filepath.Join(dir, ".tend", "fifo", "echo-0.in")); err != nil {
		t.Errorf("the stdin FIFO after the daemon came up: %v", err)
	}
	killUp(t, up, up.Process.Pid, map[string]int{"echo:0": *st.PID})
	startUp(t, tend, conf)
	idleACP(t, c, "echo:0")
	if out := promptOK(t, tend, sock, "echo:0", "four"); !strings.Contains(out, "echo 4: four") {
		t.Errorf("the answer after a second daemon kill: %q", out)
	}
}

// TestACPQueue: prompts wait behind the turn under way, at most 16 of
// them (the next is 429), and are answered one at a time in order.
func TestACPQueue(t *testing.T) {
	tend, dir, c := acpFleet(t, acpAgentConf(t, "", `ACP_MODE = "slow"`, `ACP_DELAY = "3s"`))
	_ = tend
	sock := filepath.Join(dir, ".tend", "tend.sock")
	idleACP(t, c, "echo:0")
	first, err := c.Prompt("echo:0", "slow")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the first turn under way", func() bool {
		s, err := c.Status("echo:0")
		return err == nil && s.TurnActive
	}, testutil.Explain(eventsOf(c)))
	ids := []string{first}
	for i := 1; i <= 16; i++ {
		id, err := c.Prompt("echo:0", fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	_, err = c.Prompt("echo:0", "one too many")
	var apiErr *client.APIError
	if !asAPIError(err, &apiErr) || apiErr.Status != 429 {
		t.Fatalf("the 17th waiting prompt: %v", err)
	}
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "prompt", "--no-wait", "echo:0", "again"); code != 1 || !strings.Contains(errOut, "16 prompts") {
		t.Errorf("tend prompt on a full queue: exit %d %s", code, errOut)
	}
	evs := auditEventsEventually(t, filepath.Join(dir, ".tend"), func(evs []program.Event) bool {
		n := 0
		for _, e := range find(evs, program.KindTurn, "echo:0") {
			if e.Data.(*program.Turn).Phase == program.PhaseTurnEnded {
				n++
			}
		}
		return n == 17
	})
	var started []string
	open := 0
	for _, e := range find(evs, program.KindTurn, "echo:0") {
		tr := e.Data.(*program.Turn)
		if tr.Phase == program.PhaseTurnStarted {
			started = append(started, tr.PromptID)
			if open++; open > 1 {
				t.Errorf("two turns at once: %s", dump(evs))
			}
		} else {
			open--
			if tr.StopReason != program.StopEndTurn {
				t.Errorf("turn %s ended %s", tr.PromptID, tr.StopReason)
			}
		}
	}
	if strings.Join(started, ",") != strings.Join(ids, ",") {
		t.Errorf("turns in the order %v, prompts sent %v", started, ids)
	}
	_, logs, _ := tendRun(t, tend, "--socket", sock, "logs", "echo:0")
	last := -1
	for i := 1; i <= 16; i++ {
		at := strings.Index(logs, fmt.Sprintf("echo %d: p%d", i+1, i))
		if at < last {
			t.Errorf("answer %d out of order:\n%s", i, logs)
		}
		last = at
	}
}

func asAPIError(err error, target **client.APIError) bool {
	e, ok := err.(*client.APIError)
	if ok {
		*target = e
	}
	return ok
}

// TestACPAuthAndMethods: an agent that refuses session/new for want of
// authentication goes fatal at once, with its reason and its methods in
// the why (and tend start tries again); a method tend does not offer is
// answered -32601.
func TestACPAuthAndMethods(t *testing.T) {
	agent := helperBinary(t, "tend-acp-agent")
	state := filepath.Join(t.TempDir(), "s.json")
	tend, dir, c := acpFleet(t, fmt.Sprintf(`[program.locked]
command = [%q]
protocol = "acp"
env = { ACP_MODE = "auth", ACP_STATE = %q }

[program.echo]
command = [%q]
protocol = "acp"
env = { ACP_STATE = %q }
`, agent, state, agent, state+"2"))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	var st program.Status
	testutil.Eventually(t, "locked:0 fatal", func() bool {
		var err error
		st, err = c.Status("locked:0")
		return err == nil && st.State == program.StateFatal
	}, testutil.Explain(eventsOf(c)))
	for _, want := range []string{"the agent needs authentication", "TEST_API_KEY is not set", "API key (api-key)", "tend start locked:0"} {
		if !strings.Contains(st.Why, want) {
			t.Errorf("why %q lacks %q", st.Why, want)
		}
	}
	if st.CrashCount != 0 || st.Restarts.Crash != 0 {
		t.Errorf("counted as a crash: %+v", st)
	}
	idleACP(t, c, "echo:0")
	if out := promptOK(t, tend, sock, "echo:0", "fs"); !strings.Contains(out, "-32601") {
		t.Errorf("fs/read_text_file was answered: %q", out)
	}
}

// TestACPUpgradeKeepsTheSession: after tend upgrade the same run answers
// in the same session, through the same FIFOs, opened again by the new
// binary.
func TestACPUpgradeKeepsTheSession(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, acpAgentConf(t, ""))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	c := client.New(sock)
	_, stderr := startUpLogged(t, tend, conf)
	st := idleACP(t, c, "echo:0")
	if out := promptOK(t, tend, sock, "echo:0", "one"); !strings.Contains(out, "echo 1: one") {
		t.Fatalf("first answer: %q", out)
	}
	replaceTend(t, tend, tend, "\n# the next build\n")
	if code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade"); code != 0 {
		t.Fatalf("tend upgrade: %d %s%s\n%s", code, out, errOut, stderr())
	}
	st2 := idleACP(t, c, "echo:0")
	if *st2.PID != *st.PID || st2.SessionID != st.SessionID {
		t.Errorf("after the upgrade: pid %d session %q, before pid %d session %q", *st2.PID, st2.SessionID, *st.PID, st.SessionID)
	}
	if out := promptOK(t, tend, sock, "echo:0", "two"); !strings.Contains(out, "echo 2: two") {
		t.Errorf("the answer after the upgrade: %q", out)
	}
}

// TestACPPromptFanOutAndInterrupt: tend prompt NAME prompts every
// instance, each line prefixed NAME:K | ; Ctrl-C cancels the turn first
// and exits 130; tend wait --until idle waits for the exact turn.
func TestACPPromptFanOutAndInterrupt(t *testing.T) {
	tend, dir, c := acpFleet(t, acpAgentConf(t, "instances = 2", `ACP_MODE = "slow"`, `ACP_DELAY = "1m"`))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	idleACP(t, c, "echo:0")
	idleACP(t, c, "echo:1")
	out := promptOK(t, tend, sock, "echo", "hi")
	for _, want := range []string{"echo:0 | echo 1: hi\n", "echo:1 | echo 1: hi\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("fan-out answer lacks %q:\n%s", want, out)
		}
	}
	stdinPrompt := exec.Command(tend, "--socket", sock, "prompt", "echo:0", "-")
	stdinPrompt.Stdin = strings.NewReader("from\nstdin")
	if out, err := stdinPrompt.Output(); err != nil || !strings.Contains(string(out), "echo 2: from\nstdin") {
		t.Errorf("tend prompt - : %v %q", err, out)
	}
	p := tendStart(t, tend, "--socket", sock, "prompt", "echo:0", "slow one")
	slowTurn(t, tend, sock, c, "echo:0")
	if code, _, _ := tendRun(t, tend, "--socket", sock, "wait", "echo:0", "--until", "idle", "--timeout", "300ms"); code != 1 {
		t.Errorf("tend wait --until idle during the turn: exit %d, want 1 (timed out)", code)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != 130 {
		t.Errorf("tend prompt after Ctrl-C: exit %d, stderr %s", code, p.stderr.String())
	}
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "wait", "echo:0", "--until", "idle", "--timeout", "30s"); code != 0 {
		t.Errorf("tend wait --until idle after the cancel: exit %d %s", code, errOut)
	}
	evs := auditEventsEventually(t, filepath.Join(dir, ".tend"), func(evs []program.Event) bool {
		turns := find(evs, program.KindTurn, "echo:0")
		return len(turns) > 0 && turns[len(turns)-1].Data.(*program.Turn).Phase == program.PhaseTurnEnded
	})
	turns := find(evs, program.KindTurn, "echo:0")
	if tr := turns[len(turns)-1].Data.(*program.Turn); tr.StopReason != program.StopCancelled {
		t.Errorf("the interrupted turn ended %q", tr.StopReason)
	}
}

// TestACPTurnGrace: tend stop of a protocol agent in a turn waits for the
// exact turn (turn_grace), saying so; the turn's end lets the stop go on.
func TestACPTurnGrace(t *testing.T) {
	tend, dir, c := acpFleet(t, acpAgentConf(t, `turn_grace = "5m"`, `ACP_MODE = "slow"`, `ACP_DELAY = "1m"`))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	idleACP(t, c, "echo:0")
	if _, err := c.Prompt("echo:0", "slow"); err != nil {
		t.Fatal(err)
	}
	slowTurn(t, tend, sock, c, "echo:0")
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "stop", "--no-wait", "echo:0"); code != 0 {
		t.Fatalf("stop: %d %s", code, errOut)
	}
	var st program.Status
	testutil.Eventually(t, "the stop waiting for the turn", func() bool {
		var err error
		st, err = c.Status("echo:0")
		return err == nil && st.State == program.StateStopping && st.TurnWaitUntil != nil
	}, testutil.Explain(eventsOf(c)))
	if !strings.Contains(st.Why, "waiting for the turn to end") || st.PID == nil {
		t.Errorf("stopping: %q", st.Why)
	}
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "cancel", "echo:0"); code != 0 {
		t.Fatalf("cancel: %d %s", code, errOut)
	}
	testutil.Eventually(t, "stopped once the turn ended", func() bool {
		s, err := c.Status("echo:0")
		return err == nil && s.State == program.StateStopped && s.PID == nil
	}, testutil.Explain(eventsOf(c)))
}

// slowTurn waits until tend-acp-agent has begun a slow turn of id's (its
// first words are in the transcript): a cancel before that is lost on it.
func slowTurn(t *testing.T, tend, sock string, c *client.Client, id string) {
	t.Helper()
	testutil.Eventually(t, "the slow turn under way in the agent", func() bool {
		_, logs, _ := tendRun(t, tend, "--socket", sock, "logs", id)
		s, err := c.Status(id)
		return err == nil && s.TurnActive && strings.Contains(logs, "slow turn under way")
	}, testutil.Explain(eventsOf(c)))
}
