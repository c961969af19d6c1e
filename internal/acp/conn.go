// Package acp is the Agent Client Protocol client of one protocol agent's
// run (docs/protocol.md): one connection over the run's stdin and stdout,
// built on github.com/coder/acp-go-sdk, that says initialize, opens or
// loads a session, sends the operator's prompts one at a time in order,
// puts the agent's permission requests to the operator (or answers them by
// policy), and turns what the agent streams into the transcript and the
// streamed answer of each prompt.
//
// A line reader (wire.go) sits in front of the SDK's connection: it bounds
// a message to 8 MiB, counts and logs the lines that are not JSON-RPC,
// keeps this connection's request ids apart from an earlier daemon's, and
// hands session/update notifications (a streamed answer) to the Conn
// itself, decoded once.
//
// Who owns what: a Conn's mutable state is guarded by its mu; its
// goroutines (the line reader, the handshake and prompt worker, the SDK's
// own) reach it only under mu. What a Conn tells its instance goes through
// Hooks.Event, which must not block (the supervisor's inbox).
package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/program"
)

// QueueMax is how many prompts may wait behind the turn under way.
const QueueMax = 16

// Sentinel errors of the operator's requests.
var (
	ErrQueueFull     = program.ErrQueueFull
	ErrClosed        = fmt.Errorf("%w: the agent's run has ended", program.ErrNotRunning)
	ErrNothingOpen   = program.ErrNothingOpen
	ErrUnknownOption = program.ErrUnknownOption
	ErrNoTurn        = program.ErrNoTurn
	// ErrNeedsAuth wraps the why of an agent that needs authentication:
	// the instance goes fatal instead of crashing in a loop.
	ErrNeedsAuth = errors.New("the agent needs authentication")
	// ErrHandshake is (errors.Is) the why of an agent that refused
	// initialize or session/new for another reason, or never answered:
	// a crash, whose why the run's end completes with what the agent
	// said on stderr.
	ErrHandshake = errors.New("the handshake failed")
	// ErrNoAnswer is (errors.Is) the why of a handshake the agent never
	// answered, its stdout ended first: an ErrHandshake that the run's
	// own end (its exit, or start_timeout) accounts for.
	ErrNoAnswer = errors.New("the agent gave no answer")
)

// EventKind is a kind of news a Conn gives its instance.
type EventKind uint8

const (
	EventReady       EventKind = iota + 1 // a session is open: SessionID, Resumable
	EventTurnStarted                      // PromptID
	EventTurnEnded                        // PromptID, StopReason, Duration
	EventAsked                            // Waiting: a permission request
	EventAnswered                         // RequestID, OptionID, By
	EventFailed                           // Err: the run must end (ErrTooLarge: a crash; ErrNeedsAuth: fatal; else a crash)
)

// Event is one piece of news for the instance.
type Event struct {
	Kind       EventKind
	SessionID  string
	Resumable  bool // the agent offers session/load
	PromptID   string
	StopReason string
	Duration   time.Duration
	Waiting    *program.Waiting
	RequestID  string
	OptionID   string
	By         string
	Err        error
}

// Hooks are where a Conn's output goes. Each may be nil.
type Hooks struct {
	Event func(Event)                 // must not block
	Text  func(p []byte)              // the transcript, as text (docs/protocol.md#the-transcript); p is not kept past the call
	Raw   func(out bool, line []byte) // each JSON-RPC line: out is tend's, else the agent's
	// NotACP hears a line of the agent's stdout that is not JSON-RPC (it
	// is also counted in Errors).
	NotACP func(line []byte)
	// End is told once, when the agent's stdout is no longer read (it
	// ended, or the connection was closed).
	End func()
}

// Options configure one run's connection.
type Options struct {
	Cwd        string // the program's cwd, for session/new and session/load
	SessionID  string // the instance's session: continued with session/load when the agent offers it
	Attached   bool   // the run is an earlier daemon's: SessionID is live in it, nothing is said first
	Permission string // program.PermissionAsk (default), PermissionAllow or PermissionDeny
	Version    string // tend's version, for clientInfo
	// IDBase puts this connection's request ids in a range of its own
	// (wire.go); a new daemon picks a new one.
	IDBase int64
	Hooks  Hooks
}

// Conn is the connection to one run's agent.
type Conn struct {
	opts   Options
	conn   *sdk.ClientSideConnection
	stdin  io.WriteCloser
	stdout io.ReadCloser
	pipeR  *io.PipeReader
	pipeW  *io.PipeWriter
	ctx    context.Context
	stop   context.CancelFunc
	errs   atomic.Int64 // lines that were not JSON-RPC
	text   textState
	batch  textBatch // the line reader's own

	mu       sync.Mutex // guards everything below
	session  string
	ready    bool
	starting string // what the handshake waits for, until ready
	loading  bool   // session/load replays the conversation: not transcribed again
	queue    []*Turn
	cur      *Turn
	asks     []*ask // open permission requests, oldest first
	closed   bool
	wake     chan struct{} // (cap 1) the worker has something to look at
	nextAsk  int
}

// Start opens the connection over the run's stdin and stdout and begins
// the handshake (unless opts.Attached). It never blocks on the agent.
func Start(stdin io.WriteCloser, stdout io.ReadCloser, opts Options) *Conn {
	if opts.Permission == "" {
		opts.Permission = program.PermissionAsk
	}
	c := &Conn{opts: opts, stdin: stdin, stdout: stdout, wake: make(chan struct{}, 1), starting: "initialize"}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.pipeR, c.pipeW = io.Pipe()
	t := newIDs(opts.IDBase)
	c.conn = sdk.NewClientSideConnection(client{c}, &wireWriter{w: stdin, ids: t, raw: opts.Hooks.Raw}, c.pipeR)
	c.conn.SetLogger(discardLogger)
	go c.read(t)
	if opts.Attached && opts.SessionID != "" {
		c.session, c.ready, c.starting = opts.SessionID, true, ""
		c.emit(Event{Kind: EventReady, SessionID: opts.SessionID, Resumable: true})
	} else {
		go c.handshake()
	}
	go c.work()
	return c
}

// read runs the line reader until the agent's stdout ends.
func (c *Conn) read(t *ids) {
	err := pump(c.stdout, c.pipeW, t, wireHooks{
		raw:    c.opts.Hooks.Raw,
		update: c.sessionUpdate,
		idle:   c.flushText,
		notACP: func(line []byte) {
			c.errs.Add(1)
			if c.opts.Hooks.NotACP != nil {
				c.opts.Hooks.NotACP(line)
			}
		},
	})
	c.pipeW.CloseWithError(io.EOF)
	if c.opts.Hooks.End != nil {
		c.opts.Hooks.End()
	}
	if errors.Is(err, ErrTooLarge) {
		c.emit(Event{Kind: EventFailed, Err: ErrTooLarge})
	}
}

func (c *Conn) emit(e Event) {
	if c.opts.Hooks.Event != nil {
		c.opts.Hooks.Event(e)
	}
}

// Errors is how many lines of the agent's stdout were not JSON-RPC.
func (c *Conn) Errors() int64 { return c.errs.Load() }

// Report is the connection as the status shows it.
func (c *Conn) Report() program.ProtocolReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := program.ProtocolReport{SessionID: c.session, Errors: c.errs.Load(), Starting: c.starting}
	if len(c.asks) > 0 {
		w := c.asks[0].w
		r.Waiting = &w
	}
	return r
}

// handshake says initialize, then opens or loads the session.
func (c *Conn) handshake() {
	init, err := c.conn.Initialize(c.ctx, sdk.InitializeRequest{
		ProtocolVersion:    sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{}, // no fs, no terminal: the agent uses its own tools
		ClientInfo:         &sdk.Implementation{Name: "tend", Version: c.opts.Version},
	})
	if err != nil {
		if needsAuth(err) {
			c.fail(fmt.Errorf("%w: %s%s", ErrNeedsAuth, reason(err), methods(nil)))
			return
		}
		c.refused("initialize", err)
		return
	}
	resumable := init.AgentCapabilities.LoadSession
	c.setStarting("session/new")
	var sid string
	if c.opts.SessionID != "" && resumable {
		c.mu.Lock()
		c.starting, c.loading = "session/load", true
		c.mu.Unlock()
		_, err = c.conn.LoadSession(c.ctx, sdk.LoadSessionRequest{Cwd: c.opts.Cwd, SessionId: sdk.SessionId(c.opts.SessionID), McpServers: []sdk.McpServer{}})
		c.mu.Lock()
		c.loading = false
		c.mu.Unlock()
		if err == nil {
			sid = c.opts.SessionID
			c.note(fmt.Sprintf("[session] continued %s (session/load)", sid))
		} else if needsAuth(err) {
			c.fail(fmt.Errorf("%w: %s%s", ErrNeedsAuth, reason(err), methods(init.AuthMethods)))
			return
		} else {
			c.note(fmt.Sprintf("[session] could not continue %s: %s; starting a new one", c.opts.SessionID, reason(err)))
		}
	}
	if sid == "" {
		resp, err := c.conn.NewSession(c.ctx, sdk.NewSessionRequest{Cwd: c.opts.Cwd, McpServers: []sdk.McpServer{}})
		if err != nil {
			if needsAuth(err) {
				c.fail(fmt.Errorf("%w: %s%s", ErrNeedsAuth, reason(err), methods(init.AuthMethods)))
			} else {
				c.refused("session/new", err)
			}
			return
		}
		sid = string(resp.SessionId)
		c.note("[session] " + sid)
	}
	c.mu.Lock()
	c.session, c.ready, c.starting = sid, true, ""
	c.mu.Unlock()
	c.emit(Event{Kind: EventReady, SessionID: sid, Resumable: resumable})
	c.poke()
}

func (c *Conn) setStarting(what string) {
	c.mu.Lock()
	c.starting = what
	c.mu.Unlock()
}

// refused ends a handshake whose request what failed for a reason other
// than authentication. An error because the agent's stdout ended (it
// exited, or closed it) is no refusal: the agent gave no answer, as the
// run's end says when it comes first (NoAnswer).
func (c *Conn) refused(what string, err error) {
	select {
	case <-c.conn.Done():
		c.fail(noAnswerError(NoAnswer(what)))
	default:
		c.fail(handshakeError(what + " failed: " + reason(err)))
	}
}

// handshakeError is a why that is ErrHandshake.
type handshakeError string

func (e handshakeError) Error() string      { return string(e) }
func (handshakeError) Is(target error) bool { return target == ErrHandshake }

// noAnswerError is a why that is ErrNoAnswer and ErrHandshake.
type noAnswerError string

func (e noAnswerError) Error() string { return string(e) }
func (noAnswerError) Is(target error) bool {
	return target == ErrNoAnswer || target == ErrHandshake
}

// NoAnswer is the why of a handshake whose request what the agent never
// answered: its run ended, or its stdout did, first.
func NoAnswer(what string) string { return "the agent gave no answer to " + what }

// fail ends the handshake: the instance ends the run.
func (c *Conn) fail(why error) {
	if c.ctx.Err() != nil {
		return // closed meanwhile: the run's end says why
	}
	c.note("[error] " + why.Error())
	c.emit(Event{Kind: EventFailed, Err: why})
}

// needsAuth reads an error as the agent asking for authentication: the
// protocol's -32000, or words that say so (Gemini CLI answers -32000
// "Gemini API key is missing or not configured", codex-acp
// "Authentication required").
func needsAuth(err error) bool {
	var re *sdk.RequestError
	if !errors.As(err, &re) {
		return false
	}
	if re.Code == -32000 {
		return true
	}
	m := strings.ToLower(reason(err))
	for _, w := range []string{"auth", "api key", "log in", "login", "credential"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// reason is the agent's own words for an error: its message, and the
// details its data carries.
func reason(err error) string {
	var re *sdk.RequestError
	if !errors.As(err, &re) {
		return err.Error()
	}
	msg := re.Message
	switch d := re.Data.(type) {
	case string:
		msg += ": " + d
	case map[string]any:
		for _, k := range []string{"details", "message", "error"} {
			if s, ok := d[k].(string); ok && s != "" && s != msg {
				msg += ": " + s
				break
			}
		}
	}
	return fmt.Sprintf("%s (%d)", msg, re.Code)
}

// methods names the authentication methods an agent offers.
func methods(ms []sdk.AuthMethod) string {
	var names []string
	for _, m := range ms {
		switch {
		case m.Agent != nil:
			names = append(names, fmt.Sprintf("%s (%s)", m.Agent.Name, m.Agent.Id))
		case m.EnvVar != nil:
			var vars []string
			for _, v := range m.EnvVar.Vars {
				vars = append(vars, v.Name)
			}
			names = append(names, fmt.Sprintf("%s (%s: set %s)", m.EnvVar.Name, m.EnvVar.Id, strings.Join(vars, ", ")))
		case m.Terminal != nil:
			names = append(names, fmt.Sprintf("%s (%s)", m.Terminal.Name, m.Terminal.Id))
		}
	}
	if len(names) == 0 {
		return "; it offers no authentication method"
	}
	return "; it offers " + strings.Join(names, ", ")
}

// Close ends the connection: the run has ended (or is being left to a
// later daemon). Queued prompts end with program.StopRunEnded, open
// permission requests are answered cancelled, and the run's stdin and
// stdout descriptors are closed.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.stop()
	c.cancelAsks()
	for _, t := range queue {
		t.finish(program.StopRunEnded)
	}
	c.stdin.Close()
	c.stdout.Close()
	c.pipeR.Close()
	c.poke()
}

func (c *Conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
