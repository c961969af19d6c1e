package cli

import (
	"encoding/json"
	"testing"
)

// TestRunProtocol: tend run --protocol acp [--permission POLICY] adds a
// protocol agent (docs/sessions.md, docs/protocol.md); a protocol other
// than acp, --protocol with --tty and --permission without --protocol or
// with an unknown policy are usage errors, refused before the daemon is
// asked.
func TestRunProtocol(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	d.tend(t, "run", "--name", "coder", "--rm", "--protocol", "acp", "--permission", "deny", "-l", "task=T", "--", "gemini", "--experimental-acp").want(t, 0, "coder\n")
	var body map[string]any
	if err := json.Unmarshal(d.b.Added("coder"), &body); err != nil {
		t.Fatal(err)
	}
	if body["protocol"] != "acp" || body["permission"] != "deny" || body["remove_on_exit"] != true {
		t.Errorf("kept body %v", body)
	}
	d.tend(t, "run", "--name", "plain", "--protocol", "acp", "--", "codex-acp").want(t, 0, "plain\n")
	body = nil
	if err := json.Unmarshal(d.b.Added("plain"), &body); err != nil {
		t.Fatal(err)
	}
	if body["protocol"] != "acp" || body["permission"] != nil {
		t.Errorf("kept body %v", body)
	}
	d.tend(t, "run", "--protocol", "mcp", "--", "x").wantErr(t, 2, `--protocol "mcp": want acp`)
	d.tend(t, "run", "--protocol", "acp", "--tty", "--", "x").wantErr(t, 2, "not with --tty")
	d.tend(t, "run", "--permission", "allow", "--", "x").wantErr(t, 2, "--permission is for an agent started with --protocol acp")
	d.tend(t, "run", "--protocol", "acp", "--permission", "maybe", "--", "x").wantErr(t, 2, `--permission "maybe"`)
}
