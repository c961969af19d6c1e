package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// refusingAgent is an ACP agent in sh that answers initialize, refuses
// session/new with -32603 "Internal error" (as claude-code-acp does as
// root) and only then says why on stderr, followed by a dump of the
// request as Node prints one; it ignores SIGTERM, so tend's stop of it
// lasts its stop_grace.
const refusingAgent = `#!/bin/sh
trap '' TERM
id() { printf '%s' "$1" | sed 's/.*"id":\([0-9]*\).*/\1/'; }
read -r l
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$(id "$l")"
read -r l
printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error"}}\n' "$(id "$l")"
sleep 0.3
echo 'refusing: this agent will not run as root, for security reasons' >&2
echo 'Error handling request {' >&2
echo "  id: $(id "$l")," >&2
echo '}' >&2
while :; do sleep 1; done
`

// TestACPRefusedSessionWhy: an agent that refuses session/new with an
// error that names no reason (-32603 "Internal error") and says why on its
// stderr, after the error: while tend stops it the why says tend stops it
// because its protocol failed (not that the run sent STOPPING=1); once it
// has ended, the why (a crash, backing off, not fatal: only
// authentication is) carries the agent's own words.
func TestACPRefusedSessionWhy(t *testing.T) {
	script := filepath.Join(t.TempDir(), "refusing.sh")
	write(t, script, refusingAgent)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, c := acpFleet(t, fmt.Sprintf("[program.refusing]\ncommand = [%q]\nprotocol = \"acp\"\nstop_grace = \"3s\"\nbackoff_initial = \"30s\"\n", script))
	var st program.Status
	testutil.Eventually(t, "refusing:0 stopped by tend", func() bool {
		var err error
		st, err = c.Status("refusing:0")
		return err == nil && st.State == program.StateStopping
	}, testutil.Explain(func() string { return st.Why }))
	if want := "stopping the run after its protocol failed (session/new failed: Internal error (-32603)): sent SIGTERM, SIGKILL after 3s"; st.Why != want {
		t.Errorf("why while stopping:\n%q, want\n%q", st.Why, want)
	}
	testutil.Eventually(t, "refusing:0 backing off", func() bool {
		var err error
		st, err = c.Status("refusing:0")
		return err == nil && st.State == program.StateBackoff
	}, testutil.Explain(func() string { return st.State + ": " + st.Why }))
	want := "; session/new failed: Internal error (-32603); the agent said: refusing: this agent will not run as root, for security reasons"
	if !strings.HasSuffix(st.Why, want) || st.CrashCount != 1 {
		t.Errorf("why after the run: %q (crash_count %d), want a crash whose why ends %q", st.Why, st.CrashCount, want)
	}
}

// TestACPEndedInHandshakeWhy: an agent that exits before it answers
// initialize, saying why on stderr (a bad flag, a missing runtime), is a
// crash of its own cause (not one the protocol found: the exit says it)
// whose why says where the handshake was and what the agent said.
func TestACPEndedInHandshakeWhy(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bad.sh")
	write(t, script, "#!/bin/sh\necho 'starting up' >&2\necho 'error: unknown option --experimental-acpp' >&2\nexit 1\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, c := acpFleet(t, fmt.Sprintf("[program.bad]\ncommand = [%q]\nprotocol = \"acp\"\nrestart = \"never\"\n", script))
	var st program.Status
	testutil.Eventually(t, "bad:0 exited", func() bool {
		var err error
		st, err = c.Status("bad:0")
		return err == nil && st.State == program.StateExited
	}, testutil.Explain(func() string { return st.State + ": " + st.Why }))
	want := `restart = "never"; the agent gave no answer to initialize; the agent said: starting up ⏎ error: unknown option --experimental-acpp`
	if !strings.HasPrefix(st.Why, "exited: exit 1 (runtime_error)") || !strings.HasSuffix(st.Why, want) {
		t.Errorf("why %q, want exit 1 and an end %q", st.Why, want)
	}
}
