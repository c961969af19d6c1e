package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Protocol agents (docs/protocol.md) against a real daemon and the SDK's
// own example agent (github.com/coder/acp-go-sdk/example/agent: no AI
// model; it streams text and two tool calls, asks permission with allow
// and reject, honours cancel).

// exampleACPAgent builds the SDK's example agent from the module cache.
func exampleACPAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/coder/acp-go-sdk/example/agent").CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example agent: %v\n%s", err, out)
	}
	return bin
}

func acpFleet(t *testing.T, body string) (tend, dir string, c *client.Client) {
	t.Helper()
	dir = t.TempDir()
	tend = tendBinary(t)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, body)
	c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
	startUp(t, tend, conf)
	return tend, dir, c
}

func idleACP(t *testing.T, c *client.Client, id string) program.Status {
	t.Helper()
	var st program.Status
	testutil.Eventually(t, id+" ready and idle", func() bool {
		var err error
		st, err = c.Status(id)
		return err == nil && st.State == program.StateRunning && st.Ready && st.Lifecycle == program.LifecycleIdle && st.SessionID != ""
	}, testutil.Explain(eventsOf(c)))
	return st
}

// TestACPPromptPermissionApprove: tend prompt streams the answer; the
// permission the agent asks shows in the status (waiting, with options)
// and in tend ps, tend approve answers it, the answer comes, the turn
// ends end_turn (exit 0), with turn and permission events, and the
// instance is idle again.
func TestACPPromptPermissionApprove(t *testing.T) {
	agent := exampleACPAgent(t)
	tend, dir, c := acpFleet(t, fmt.Sprintf("[program.coder]\ncommand = [%q]\nprotocol = \"acp\"\n", agent))
	idleACP(t, c, "coder:0")

	p := tendStart(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "prompt", "coder:0", "fix", "the", "build")
	var st program.Status
	testutil.Eventually(t, "the permission request in the status", func() bool {
		var err error
		st, err = c.Status("coder:0")
		return err == nil && st.Waiting != nil
	}, testutil.Explain(eventsOf(c)))
	if !st.TurnActive || st.Lifecycle != program.LifecycleRunning || len(st.Waiting.Options) != 2 || !strings.Contains(st.Why, "waiting for permission") {
		t.Errorf("waiting status: turn %v lifecycle %s options %+v why %q", st.TurnActive, st.Lifecycle, st.Waiting.Options, st.Why)
	}
	if _, out, _ := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "ps"); !strings.Contains(out, "waiting") {
		t.Errorf("tend ps does not show waiting:\n%s", out)
	}
	if _, out, _ := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "status", "coder:0"); !strings.Contains(out, "waiting:") || !strings.Contains(out, "allow (allow_once: Allow this change)") {
		t.Errorf("tend status of a waiting agent:\n%s", out)
	}
	if code, _, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "approve", "coder:0", "nope"); code != 2 {
		t.Errorf("approve with an unknown option: exit %d (%s)", code, errOut)
	}
	if st, _ := c.Status("coder:0"); st.Waiting == nil {
		t.Fatal("an unknown option closed the request")
	}
	if code, out, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "approve", "coder"); code != 0 {
		t.Fatalf("approve: exit %d %s %s", code, out, errOut)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("tend prompt: exit %d\nstdout:\n%s\nstderr:\n%s", code, p.stdout.String(), p.stderr.String())
	}
	out := p.stdout.String()
	for _, want := range []string{"[tool] ", "Perfect!", "[permission] "} {
		if !strings.Contains(out, want) {
			t.Errorf("the answer lacks %q:\n%s", want, out)
		}
	}
	idleACP(t, c, "coder:0")
	evs := auditEventsEventually(t, filepath.Join(dir, ".tend"), func(evs []program.Event) bool {
		return len(find(evs, program.KindTurn, "coder:0")) >= 2
	})
	turns := find(evs, program.KindTurn, "coder:0")
	if end := turns[len(turns)-1].Data.(*program.Turn); end.Phase != program.PhaseTurnEnded || end.StopReason != program.StopEndTurn || end.DurationMS == nil {
		t.Errorf("turn ended: %+v", end)
	}
	perms := find(evs, program.KindPermission, "coder:0")
	if len(perms) != 2 || perms[1].Data.(*program.Permission).By != program.ByOperator || perms[1].Data.(*program.Permission).OptionID != "allow" {
		t.Errorf("permission events:\n%s", dump(perms))
	}
	if _, logs, _ := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "logs", "coder:0"); !strings.Contains(logs, "> fix the build") || !strings.Contains(logs, "[tool] ") {
		t.Errorf("the transcript in the log:\n%s", logs)
	}
	if _, raw, _ := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "logs", "coder:0", "--raw"); !strings.Contains(raw, `"method":"session/prompt"`) || strings.Contains(raw, "> fix the build") {
		t.Errorf("logs --raw:\n%s", raw)
	}
	if _, logs, _ := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "logs", "coder:0"); strings.Contains(logs, `"jsonrpc"`) {
		t.Errorf("the JSON-RPC lines in tend logs without --raw:\n%s", logs)
	}
	if code, _, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "approve", "coder:0"); code != 1 || !strings.Contains(errOut, "no permission request is open") {
		t.Errorf("approve with nothing open: exit %d %s", code, errOut)
	}
	resp, err := unixHTTP(filepath.Join(dir, ".tend", "tend.sock")).Get("http://tend/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tend_protocol_turns_total{stop_reason="end_turn"} 1`, `tend_protocol_permission_requests_total{answer="operator"} 1`, "tend_protocol_turn_duration_seconds_count 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// A second prompt, its request denied from the CLI.
	p2 := tendStart(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "prompt", "coder:0", "again")
	testutil.Eventually(t, "the second permission request", func() bool {
		st, err := c.Status("coder:0")
		return err == nil && st.Waiting != nil
	}, testutil.Explain(eventsOf(c)))
	if code, out, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "deny", "coder"); code != 0 || !strings.Contains(out, "reject") {
		t.Fatalf("deny: exit %d %s %s", code, out, errOut)
	}
	if code := p2.wait(t); code != 0 || !strings.Contains(p2.stdout.String(), "prefer not to make that change") {
		t.Errorf("the denied turn: exit %d\n%s", code, p2.stdout.String())
	}
	if code, _, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "cancel", "coder:0"); code != 1 || !strings.Contains(errOut, "no turn") {
		t.Errorf("cancel with no turn: exit %d %s", code, errOut)
	}
}

// auditEventsEventually reads the audit log until ok holds.
func auditEventsEventually(t *testing.T, stateDir string, ok func([]program.Event) bool) []program.Event {
	t.Helper()
	var evs []program.Event
	testutil.Eventually(t, "the events in the audit log", func() bool {
		evs = auditEvents(t, stateDir)
		return ok(evs)
	}, testutil.Explain(func() string { return dump(evs) }))
	return evs
}

// TestACPPermissionDenyPolicy: permission = "deny" answers at once by
// policy with the reject option; the turn still ends end_turn.
func TestACPPermissionDenyPolicy(t *testing.T) {
	agent := exampleACPAgent(t)
	tend, dir, c := acpFleet(t, fmt.Sprintf("[program.coder]\ncommand = [%q]\nprotocol = \"acp\"\npermission = \"deny\"\n", agent))
	idleACP(t, c, "coder:0")
	code, out, errOut := tendRun(t, tend, "--socket", filepath.Join(dir, ".tend", "tend.sock"), "prompt", "coder:0", "hello")
	if code != 0 || !strings.Contains(out, "prefer not to make that change") {
		t.Fatalf("prompt: exit %d\n%s\n%s", code, out, errOut)
	}
	evs := auditEventsEventually(t, filepath.Join(dir, ".tend"), func(evs []program.Event) bool {
		return len(find(evs, program.KindPermission, "coder:0")) >= 2
	})
	perms := find(evs, program.KindPermission, "coder:0")
	if a := perms[1].Data.(*program.Permission); a.By != program.ByPolicy || a.OptionID != "reject" {
		t.Errorf("answered: %+v", a)
	}
}

// TestACPCancelMidTurn: tend cancel while the agent streams its answer
// (permission = "allow", so no request holds the turn): the agent ends its
// turn cancelled, and the waiting prompt exits 1 naming the stop reason.
// (The example agent ends a turn whose permission request was answered
// cancelled with end_turn, so the cancel comes while it streams.)
func TestACPCancelMidTurn(t *testing.T) {
	agent := exampleACPAgent(t)
	tend, dir, c := acpFleet(t, fmt.Sprintf("[program.coder]\ncommand = [%q]\nprotocol = \"acp\"\npermission = \"allow\"\n", agent))
	idleACP(t, c, "coder:0")
	sock := filepath.Join(dir, ".tend", "tend.sock")
	p := tendStart(t, tend, "--socket", sock, "prompt", "coder:0", "hello")
	// Once it streams: a session/cancel that comes before the example
	// agent has begun its turn is lost on it.
	testutil.Eventually(t, "the answer streaming", func() bool {
		_, logs, _ := tendRun(t, tend, "--socket", sock, "logs", "coder:0")
		return strings.Contains(logs, "Example Agent")
	}, testutil.Explain(eventsOf(c)))
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "cancel", "coder:0"); code != 0 {
		t.Fatalf("cancel: exit %d %s", code, errOut)
	}
	if code := p.wait(t); code != 1 || !strings.Contains(p.stderr.String(), "cancelled") {
		t.Errorf("prompt after cancel: exit %d, stderr %s", code, p.stderr.String())
	}
	idleACP(t, c, "coder:0")
}

// TestACPBadInput: a program without protocol is refused; an agent that
// prints lines that are not JSON-RPC keeps running with them counted;
// one that sends a line over 8 MiB ends as a crash with the why.
func TestACPBadInput(t *testing.T) {
	agent := exampleACPAgent(t)
	dir0 := t.TempDir()
	wrap := filepath.Join(dir0, "noisy.sh")
	write(t, wrap, "#!/bin/sh\necho 'hello, I am not JSON'\necho '{\"not\":\"rpc\"}'\nexec "+agent+"\n")
	os.Chmod(wrap, 0o755)
	big := filepath.Join(dir0, "big.sh")
	write(t, big, "#!/bin/sh\nhead -c 9000000 /dev/zero | tr '\\0' x\necho\nexec sleep 1000\n")
	os.Chmod(big, 0o755)
	tend, dir, c := acpFleet(t, fmt.Sprintf(`[program.worker]
command = ["sleep", "1000"]

[program.noisy]
command = [%q]
protocol = "acp"

[program.big]
command = [%q]
protocol = "acp"
restart = "never"
`, wrap, big))
	sock := filepath.Join(dir, ".tend", "tend.sock")
	st := idleACP(t, c, "noisy:0")
	code, _, errOut := tendRun(t, tend, "--socket", sock, "prompt", "worker:0", "hi")
	if code != 1 || !strings.Contains(errOut, `worker:0 does not speak a protocol (protocol = "")`) {
		t.Errorf("prompt to a worker: exit %d %s", code, errOut)
	}
	if st.ProtocolErrors == nil || *st.ProtocolErrors != 2 {
		t.Errorf("protocol_errors %v", st.ProtocolErrors)
	}
	if _, logs, _ := tendRun(t, tend, "--socket", sock, "logs", "noisy:0"); !strings.Contains(logs, "[not acp] hello, I am not JSON") {
		t.Errorf("logs:\n%s", logs)
	}
	testutil.Eventually(t, "big:0 ended by its 9 MB line", func() bool {
		st, err := c.Status("big:0")
		return err == nil && st.State == program.StateExited && strings.Contains(st.Why, "over 8 MiB")
	}, testutil.Explain(eventsOf(c)))
	if code, _, errOut := tendRun(t, tend, "--socket", sock, "prompt", "big:0", "hi"); code != 1 || !strings.Contains(errOut, "big:0 is not running") || !strings.Contains(errOut, "over 8 MiB") {
		t.Errorf("prompt to an ended agent: exit %d %s", code, errOut)
	}
}
