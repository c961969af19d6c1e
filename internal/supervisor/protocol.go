package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/acp"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
)

// Protocol agents (docs/protocol.md): each run of a program with protocol
// = "acp" has an acp.Conn over its stdin and stdout. The Conn's news
// comes to the loop through the inbox (mail.acp), where it becomes the
// run's readiness, its exact turn, the turn and permission events, and,
// for a connection that fails, the end of the run. Operators reach the
// current Conn through the instance's Protocol (Manager.Protocols).

// Protocol is a protocol instance's side that outlives its runs: the
// session it continues and the current run's connection. Guarded by mu:
// the loop sets the connection, API goroutines use it.
type Protocol struct {
	id   string
	spec *program.Spec

	mu      sync.Mutex
	conn    *acp.Conn
	connSet chan struct{} // closed (and made anew) when conn is set: WaitConn
	session string        // the session the next run continues (kept intent)
	turn    string        // the prompt whose turn is under way
	why     string        // why the protocol ended the last run (fatal or a crash); "" when it did not
	ask     bool          // the why is a refusal that is not about authentication: the agent's stderr may say why
}

// idBase gives each daemon's connections a range of request ids of their
// own (acp.Options.IDBase): an answer meant for an earlier daemon is
// never taken for one of this one's.
var idBase = (time.Now().UnixMilli() % (1 << 31)) << 21

func newProtocol(in *Instance) *Protocol {
	if in.spec.Protocol == program.ProtocolNone {
		return nil
	}
	in.out.SetProtocol()
	return &Protocol{id: in.id, spec: in.spec, connSet: make(chan struct{})}
}

func (p *Protocol) sessionID() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session
}

func (p *Protocol) turnID() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turn
}

func (p *Protocol) restore(session, turn string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.session, p.turn = session, turn
	p.mu.Unlock()
}

// Conn is the current run's connection, or an error saying why there is
// none: program.ErrNotRunning.
func (p *Protocol) Conn() (*acp.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil, fmt.Errorf("%s is %w", p.id, program.ErrNotRunning)
	}
	return p.conn, nil
}

// WaitConn is Conn, waiting (until ctx ends) for a connection while there
// is none: a run being started, adopted or carried over an upgrade is
// spoken to a moment after its instance is listed, and a prompt sent in
// that moment waits its turn rather than fail (docs/protocol.md).
func (p *Protocol) WaitConn(ctx context.Context) (*acp.Conn, error) {
	for {
		p.mu.Lock()
		c, set := p.conn, p.connSet
		p.mu.Unlock()
		if c != nil {
			return c, nil
		}
		select {
		case <-set:
		case <-ctx.Done():
			return p.Conn()
		}
	}
}

// report is the status's part, read by the broker when asked.
func (p *Protocol) report() program.ProtocolReport {
	p.mu.Lock()
	c, session := p.conn, p.session
	p.mu.Unlock()
	if c == nil {
		return program.ProtocolReport{SessionID: session}
	}
	r := c.Report()
	if r.SessionID == "" {
		r.SessionID = session
	}
	return r
}

// startProtocol opens the connection of a run just started (or, attached,
// of a run an earlier daemon started, whose session is live in it).
func (in *Instance) startProtocol(stdin, stdout *os.File, attached bool, n int) {
	p := in.proto
	if p == nil || stdin == nil || stdout == nil {
		if stdin != nil {
			stdin.Close()
		}
		if stdout != nil {
			stdout.Close()
		}
		return
	}
	p.mu.Lock()
	session := p.session
	p.why, p.ask = "", false
	p.mu.Unlock()
	c := acp.Start(stdin, stdout, acp.Options{
		Cwd: in.spec.Cwd, SessionID: session, Attached: attached && session != "",
		Permission: in.spec.Permission, IDBase: idBase, Version: in.deps.Version,
		Hooks: acp.Hooks{
			Event: func(e acp.Event) { in.put(func(m *mail) { m.acp = append(m.acp, acpNews{run: n, e: e}) }) },
			Text:  in.out.Text,
			Raw:   func(_ bool, line []byte) { in.out.Raw(line) },
			NotACP: func(line []byte) {
				in.out.Text([]byte("[not acp] " + string(line) + "\n"))
			},
			End: in.out.EndText,
		},
	})
	p.mu.Lock()
	p.conn = c
	close(p.connSet)
	p.connSet = make(chan struct{})
	p.mu.Unlock()
}

// acpNews is a connection's news, with the run it is about.
type acpNews struct {
	run int
	e   acp.Event
}

// closeProtocol closes the current run's connection, if any: queued
// prompts end, open requests are answered cancelled. The run goes on
// (an upgrade hands it over) or has ended (endProtocol).
func (in *Instance) closeProtocol() *acp.Conn {
	p := in.proto
	if p == nil {
		return nil
	}
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return c
}

// endProtocol closes the connection of the run that ended, and completes
// the why of a handshake that failed.
func (in *Instance) endProtocol() {
	p := in.proto
	if p == nil {
		return
	}
	var waited string // the answer the handshake waited for, if it had not ended
	if c := in.closeProtocol(); c != nil {
		waited = c.Report().Starting
	}
	p.mu.Lock()
	ask := p.ask
	p.ask = false
	// A run that ended in its handshake (it exited, or start_timeout
	// ended it) failed it as surely as one that refused it.
	if waited != "" && p.why == "" {
		p.why, ask = acp.NoAnswer(waited), true
	}
	p.mu.Unlock()
	if ask {
		// The agent refused the handshake with an error that names no
		// reason of its own ("Internal error"): what it said on stderr
		// often does. Read now that the run is gone and its pipes are
		// drained, as it may come after the error on the wire.
		if said := in.out.StderrTail(2); said != "" {
			p.mu.Lock()
			p.why += "; the agent said: " + said
			p.mu.Unlock()
		}
	}
}

// attachProtocol takes up the protocol of a run adopted from an earlier
// daemon: its stdin and stdout FIFOs, and the session kept in the intent
// record. A turn that was under way is over for this daemon: no answer to
// it can reach it (its request id was the earlier daemon's), so it ends
// with stop reason run_ended and the agent is told session/cancel.
func (in *Instance) attachProtocol() {
	p := in.proto
	if p == nil || in.cur == nil {
		return
	}
	stdin, stdout, err := in.out.AttachProtocol()
	if err != nil || stdin == nil {
		why := "no FIFOs in the state directory"
		if err != nil {
			why = err.Error()
		}
		in.out.Note("cannot speak to the adopted run's agent: " + why)
		return
	}
	in.startProtocol(stdin, stdout, true, in.cur.n)
	p.mu.Lock()
	turn := p.turn
	p.turn = ""
	c := p.conn
	p.mu.Unlock()
	if turn != "" {
		in.publish(program.KindTurn, &program.Turn{Phase: program.PhaseTurnEnded, PromptID: turn, StopReason: program.StopRunEnded})
		if c != nil {
			_ = c.CancelSession()
		}
	}
	in.turnSet, in.turn = true, false
}

// onACP handles one piece of a connection's news.
func (in *Instance) onACP(n acpNews) {
	p, e := in.proto, n.e
	if p == nil {
		return
	}
	cur := in.cur != nil && in.cur.n == n.run
	switch e.Kind {
	case acp.EventReady:
		p.mu.Lock()
		p.session = e.SessionID
		if !e.Resumable {
			p.session = "" // nothing to continue: the next run starts a new one
		}
		p.mu.Unlock()
		if cur && !in.cur.signalled {
			in.r.ready = true
			if in.state == program.StateStarting {
				in.state = program.StateRunning
			}
			if in.startT != nil {
				in.startT.Stop()
				in.startT = nil
			}
		}
	case acp.EventTurnStarted:
		p.mu.Lock()
		p.turn = e.PromptID
		p.mu.Unlock()
		if cur {
			in.turnSet, in.turn = true, true
		}
		in.publish(program.KindTurn, &program.Turn{Phase: program.PhaseTurnStarted, PromptID: e.PromptID})
	case acp.EventTurnEnded:
		p.mu.Lock()
		if p.turn == e.PromptID {
			p.turn = ""
		}
		p.mu.Unlock()
		ms := e.Duration.Milliseconds()
		in.publish(program.KindTurn, &program.Turn{Phase: program.PhaseTurnEnded, PromptID: e.PromptID, StopReason: e.StopReason, DurationMS: &ms})
		if in.deps.Turned != nil {
			in.deps.Turned(e.StopReason, e.Duration)
		}
		if cur {
			in.turn = false
			if !in.cur.turnWait.IsZero() {
				in.checkTurnWait()
			}
		}
	case acp.EventAsked:
		w := e.Waiting
		in.publish(program.KindPermission, &program.Permission{Phase: program.PhaseAsked, RequestID: w.RequestID, Title: w.Title, ToolKind: w.ToolKind, Options: w.Options})
	case acp.EventAnswered:
		in.publish(program.KindPermission, &program.Permission{Phase: program.PhaseAnswered, RequestID: e.RequestID, OptionID: e.OptionID, By: e.By})
		if in.deps.Answered != nil {
			in.deps.Answered(e.By)
		}
	case acp.EventFailed:
		if !cur || in.cur.signalled {
			return
		}
		auth := errors.Is(e.Err, acp.ErrNeedsAuth)
		p.mu.Lock()
		p.why, p.ask = e.Err.Error(), !auth && errors.Is(e.Err, acp.ErrHandshake)
		p.mu.Unlock()
		if auth {
			in.endWith(restart.IntentProtocolFatal, in.spec.StopSignal, in.spec.StopGrace)
			return
		}
		if errors.Is(e.Err, acp.ErrNoAnswer) {
			return // its stdout ended: its exit (or start_timeout) ends it, as its own cause
		}
		in.endWith(restart.IntentProtocolCrash, in.spec.StopSignal, in.spec.StopGrace)
	}
}

// protocolWhy is why the protocol ended the last run, for the status.
func (in *Instance) protocolWhy() string {
	if in.proto == nil {
		return ""
	}
	in.proto.mu.Lock()
	defer in.proto.mu.Unlock()
	return in.proto.why
}

// Protocols resolves a selector as Resolve does and returns, with each
// id, the instance's protocol side: nil for an instance without one.
func (m *Manager) Protocols(sel string) ([]string, []*Protocol, error) {
	insts, err := m.resolve(sel)
	if err != nil {
		return nil, nil, err
	}
	ps := make([]*Protocol, len(insts))
	for i, in := range insts {
		ps[i] = in.proto
	}
	return idsOf(insts), ps, nil
}
