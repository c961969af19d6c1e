package acptest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestTSAgentAsDocumented walks docs/protocol.md and docs/sessions.md as a
// new operator would, with the TypeScript-SDK agent started on demand by
// tend run --protocol acp: the answer streamed with its plan, tool and
// permission lines; tend approve picking the first allow_once option (the
// agent's is named allow-once, not allow) and tend deny the first
// reject_once; an unknown option (exit 2) leaving the request open;
// approve with nothing open (exit 1); --no-wait printing the prompt_id;
// tend wait --until idle; a cancelled turn (exit 1, the stop reason on
// stderr) and Ctrl-C (130); the verbs on a program without protocol (exit
// 1, one line) and their API statuses (409, 400); the transcript in tend
// logs and the JSON-RPC with --raw.
func TestTSAgentAsDocumented(t *testing.T) {
	needProtocol(t)
	argv := testutil.TSAgent(t)
	f := up(t, "[program.worker]\ncommand = [\"sleep\", \"1000\"]\n")
	args := append([]string{"run", "--rm", "--name", "ts", "--protocol", "acp", "-l", "task=T", "--"}, argv...)
	if code, out, errOut := f.run(args...); code != 0 || out != "ts\n" {
		t.Fatalf("tend run --protocol acp: exit %d %q %s", code, out, errOut)
	}
	idle := func(s program.Status) bool {
		return s.State == program.StateRunning && s.Ready && s.Lifecycle == program.LifecycleIdle && s.SessionID != ""
	}
	st := f.await(t, "ts:0", "ready and idle", idle)
	if st.Protocol != program.ProtocolACP || st.Labels["task"] != "T" || !st.Agent {
		t.Errorf("the status of an agent from tend run --protocol acp: protocol %q labels %v agent %v", st.Protocol, st.Labels, st.Agent)
	}

	// A turn with a plan, a tool call and a permission request, approved.
	p := f.bg("prompt", "ts:0", "plan tool permission")
	st = f.await(t, "ts:0", "waiting for permission", func(s program.Status) bool { return s.Waiting != nil })
	if _, out, _ := f.run("ps"); !strings.Contains(out, "waiting") {
		t.Errorf("tend ps does not show waiting:\n%s", out)
	}
	if code, _, errOut := f.run("approve", "ts:0", "nope"); code != 2 {
		t.Errorf("approve ts:0 nope: exit %d %s, want 2", code, errOut)
	}
	if s, err := f.c.Status("ts:0"); err != nil || s.Waiting == nil || s.Waiting.RequestID != st.Waiting.RequestID {
		t.Fatalf("an unknown option changed the request: %+v %v", s.Waiting, err)
	}
	_, err := f.c.Answer("ts:0", program.PermissionAnswer{RequestID: st.Waiting.RequestID, OptionID: "nope"})
	if status(err) != 400 {
		t.Errorf("an unknown option over the API: %v, want 400", err)
	}
	if code, out, errOut := f.run("approve", "ts:0"); code != 0 || !strings.Contains(out, "allow-once") {
		t.Fatalf("approve ts:0: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut := p.wait(t)
	if code != 0 {
		t.Fatalf("the approved turn: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"[plan] [x] Read the conversation\n", "[plan] [~] Answer with what was said\n",
		"[tool] Reading the session file (read) in_progress\n", "[tool] Reading the session file (read) completed\n",
		"[permission] Writing notes.txt (edit) asks: allow-once = Allow once, reject-once = Reject\n",
		"[permission] Writing notes.txt: allow-once (by operator)\n",
		"Permission granted (allow-once)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the answer lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := f.run("approve", "ts:0"); code != 1 || !strings.Contains(errOut, "no permission request is open") {
		t.Errorf("approve with nothing open: exit %d %s", code, errOut)
	}
	if _, err := f.c.Answer("ts:0", program.PermissionAnswer{OptionID: "allow-once"}); status(err) != 409 {
		t.Errorf("an answer with nothing open over the API: %v, want 409", err)
	}

	// Denied: the first reject_once.
	p = f.bg("prompt", "ts:0", "permission")
	f.await(t, "ts:0", "waiting for permission", func(s program.Status) bool { return s.Waiting != nil })
	if code, out, errOut := f.run("deny", "ts:0"); code != 0 || !strings.Contains(out, "reject-once") {
		t.Fatalf("deny ts:0: exit %d %q %s", code, out, errOut)
	}
	if code, out, _ := p.wait(t); code != 0 || !strings.Contains(out, "Permission refused (reject-once)") {
		t.Errorf("the denied turn: exit %d\n%s", code, out)
	}

	// --no-wait, then tend wait --until idle.
	code, out, errOut = f.run("prompt", "--no-wait", "ts:0", "hello")
	if code != 0 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || len(strings.TrimSpace(out)) < 4 {
		t.Fatalf("prompt --no-wait: exit %d %q %s, want the prompt_id on a line", code, out, errOut)
	}
	if code, _, errOut := f.run("wait", "ts:0", "--until", "idle", "--timeout", "60s"); code != 0 {
		t.Errorf("tend wait --until idle: exit %d %s", code, errOut)
	}

	// Cancelled by tend cancel: exit 1, the stop reason on stderr.
	p = f.bg("prompt", "ts:0", "slow")
	// Once it streams (the log has the answer's line once it ends).
	f.await(t, "ts:0", "streaming", func(program.Status) bool { return strings.Contains(p.stdout.String(), "tick 1.") })
	if code, _, errOut := f.run("cancel", "ts:0"); code != 0 {
		t.Fatalf("cancel: exit %d %s", code, errOut)
	}
	if code, _, errOut := p.wait(t); code != 1 || !strings.Contains(errOut, "cancelled") {
		t.Errorf("the cancelled prompt: exit %d, stderr %q", code, errOut)
	}
	// Ctrl-C: session/cancel first, then 130.
	f.await(t, "ts:0", "idle again", idle)
	p = f.bg("prompt", "ts:0", "slow again")
	f.await(t, "ts:0", "in a turn", func(s program.Status) bool { return s.TurnActive })
	p.cmd.Process.Signal(syscall.SIGINT)
	if code, _, errOut := p.wait(t); code != 130 {
		t.Errorf("the interrupted prompt: exit %d, stderr %q", code, errOut)
	}
	f.await(t, "ts:0", "idle after the interrupt", idle)

	// The verbs on a program that speaks no protocol: one line, exit 1;
	// 409 over the API.
	for _, verb := range [][]string{{"prompt", "worker:0", "hi"}, {"cancel", "worker:0"}, {"approve", "worker:0"}, {"deny", "worker:0"}} {
		code, out, errOut := f.run(verb...)
		if want := "tend: worker:0 does not speak a protocol (protocol = \"\")\n"; code != 1 || out != "" || errOut != want {
			t.Errorf("tend %s: exit %d %q %q, want exit 1 and %q", strings.Join(verb, " "), code, out, errOut, want)
		}
	}
	if _, err := f.c.Prompt("worker:0", "hi"); status(err) != 409 {
		t.Errorf("a prompt to worker:0 over the API: %v, want 409", err)
	}
	if err := f.c.Cancel("worker:0"); status(err) != 409 {
		t.Errorf("a cancel of worker:0 over the API: %v, want 409", err)
	}
	if _, err := f.c.Answer("worker:0", program.PermissionAnswer{OptionID: "allow"}); status(err) != 409 {
		t.Errorf("an answer to worker:0 over the API: %v, want 409", err)
	}

	// The transcript, and the JSON-RPC with --raw.
	_, logs, _ := f.run("logs", "ts:0", "-n", "1000")
	for _, want := range []string{"> plan tool permission\n", "[tool] Reading the session file (read) completed\n", "[plan] [x] Read the conversation\n", "[permission] Writing notes.txt (edit) asks: "} {
		if !strings.Contains(logs, want) {
			t.Errorf("tend logs lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, `"jsonrpc"`) {
		t.Errorf("JSON-RPC in tend logs without --raw:\n%s", logs)
	}
	if _, raw, _ := f.run("logs", "ts:0", "--raw", "-n", "1000"); !strings.Contains(raw, `"method":"session/prompt"`) || strings.Contains(raw, "> plan tool permission") {
		t.Errorf("tend logs --raw:\n%s", raw)
	}
}

// status is the HTTP status of an API error, 0 for another error.
func status(err error) int {
	var e *client.APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// run runs a tend verb in the fleet's directory: its exit code, stdout
// and stderr.
func (f *fleet) run(args ...string) (int, string, string) {
	p := f.start0(args...)
	return p.waitFor()
}

// bg starts a tend verb and leaves it running.
func (f *fleet) bg(args ...string) *verb { return f.start0(args...) }

type verb struct {
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	stdout, stderr testutil.Buffer // read while it runs
	err            error
}

func (f *fleet) start0(args ...string) *verb {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testutil.Deadline)
	v := &verb{cancel: cancel}
	v.cmd = exec.CommandContext(ctx, f.bin, args...)
	v.cmd.Dir, v.cmd.Env = f.dir, f.env
	v.cmd.Stdout, v.cmd.Stderr = &v.stdout, &v.stderr
	v.cmd.WaitDelay = time.Second
	v.err = v.cmd.Start()
	return v
}

func (v *verb) waitFor() (int, string, string) {
	defer v.cancel()
	if v.err != nil {
		return -1, "", v.err.Error()
	}
	err := v.cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return -1, v.stdout.String(), v.stderr.String() + err.Error()
	}
	return code, v.stdout.String(), v.stderr.String()
}

func (v *verb) wait(t *testing.T) (int, string, string) {
	t.Helper()
	code, out, errOut := v.waitFor()
	if code < 0 {
		t.Fatalf("tend %v: %s", v.cmd.Args[1:], errOut)
	}
	return code, out, errOut
}
