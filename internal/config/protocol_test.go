package config

import (
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// protocol = "acp" makes an agent with the permission policy asked for;
// [defaults] reach it like any key; without it nothing changes.
func TestProtocolKeys(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", `
[defaults]
permission = "deny"

[program.a]
command = ["agent"]
protocol = "acp"

[program.b]
command = ["agent"]
protocol = "acp"
permission = "allow"
agent = false

[program.w]
command = ["worker"]
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]program.Spec{}
	for _, s := range cfg.Programs {
		got[s.Name] = s
	}
	if a := got["a"]; a.Protocol != program.ProtocolACP || !a.Agent || a.Permission != program.PermissionDeny {
		t.Errorf("a: protocol %q agent %v permission %q", a.Protocol, a.Agent, a.Permission)
	}
	if b := got["b"]; b.Protocol != program.ProtocolACP || !b.Agent || b.Permission != program.PermissionAllow {
		t.Errorf("b: protocol %q agent %v permission %q", b.Protocol, b.Agent, b.Permission)
	}
	if w := got["w"]; w.Protocol != program.ProtocolNone || w.Agent {
		t.Errorf("w: protocol %q agent %v", w.Protocol, w.Agent)
	}
}
