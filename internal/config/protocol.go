package config

import "github.com/tend-sh/tend/internal/program"

// protocol reads protocol and permission (docs/protocol.md): whether tend
// speaks the Agent Client Protocol on the run's stdio, and how the agent's
// permission requests are answered. A protocol run's stdio is the
// protocol, so it cannot also be a terminal; and it is an agent, whose
// turns the protocol tells exactly.
func (d *programDecoder) protocol(v view, s *program.Spec) {
	p, ok := d.setString(v, "protocol", &s.Protocol)
	if ok && s.Protocol != program.ProtocolNone && s.Protocol != program.ProtocolACP {
		d.add(p, `must be "" or "acp", got "`+s.Protocol+`"`)
		s.Protocol = program.ProtocolNone
		return
	}
	d.setEnum(v, "permission", &s.Permission, program.PermissionAsk, program.PermissionAllow, program.PermissionDeny)
	if s.Protocol == program.ProtocolNone {
		return
	}
	if s.Tty {
		d.add(v.blame("protocol", "tty"), "protocol = \"acp\" speaks on the run's stdin and stdout: it cannot be set with tty = true")
		return
	}
	s.Agent = true
}
