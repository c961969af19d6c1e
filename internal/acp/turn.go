package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/program"
)

// maxFollowed bounds what a Turn keeps for a reader that does not keep
// up (bytes of text): past it the reader is told the answer was cut.
const maxFollowed = 64 << 20

// Turn is one prompt: queued, under way, then ended with a stop reason.
// Its streamed answer is kept for the one who follows it (Prompt's
// follow), until read. Guarded by mu.
type Turn struct {
	ID   string
	Text string

	mu      sync.Mutex
	follow  bool
	updates []program.TurnUpdate
	size    int
	cut     bool
	ended   bool
	stop    string
	sig     chan struct{} // (cap 1) something to read
	started time.Time
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// add hands a piece of the answer to the follower, if any.
func (t *Turn) add(u program.TurnUpdate) {
	t.mu.Lock()
	if t.follow && !t.ended {
		if t.size += len(u.Text); t.size > maxFollowed {
			t.cut = true
		} else {
			t.updates = append(t.updates, u)
		}
	}
	t.mu.Unlock()
	t.signal()
}

func (t *Turn) signal() {
	select {
	case t.sig <- struct{}{}:
	default:
	}
}

// finish ends the turn with stop (once).
func (t *Turn) finish(stop string) {
	t.mu.Lock()
	if !t.ended {
		t.ended, t.stop = true, stop
	}
	t.mu.Unlock()
	t.signal()
}

// Next returns what came since the last call, and the stop reason once
// the turn has ended (then "" never again follows). It waits until there
// is something or ctx ends.
func (t *Turn) Next(ctx context.Context) (updates []program.TurnUpdate, stop string, err error) {
	for {
		t.mu.Lock()
		updates, t.updates = t.updates, nil
		t.size = 0
		ended, stop, cut := t.ended, t.stop, t.cut
		t.cut = false
		t.mu.Unlock()
		if cut {
			updates = append(updates, program.TurnUpdate{Type: program.UpdateText, Text: "\n[tend] part of the answer was left out: it came faster than it was read\n"})
		}
		if len(updates) > 0 || ended {
			if !ended {
				stop = ""
			}
			return updates, stop, nil
		}
		select {
		case <-t.sig:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

// Prompt queues text as the next prompt; follow keeps its streamed answer
// for Next. At most QueueMax prompts wait behind the turn under way
// (ErrQueueFull).
func (c *Conn) Prompt(text string, follow bool) (*Turn, error) {
	t := &Turn{ID: newID(), Text: text, follow: follow, sig: make(chan struct{}, 1)}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case len(c.queue) >= QueueMax:
		c.mu.Unlock()
		return nil, ErrQueueFull
	}
	c.queue = append(c.queue, t)
	c.mu.Unlock()
	c.poke()
	return t, nil
}

// Cancel sends session/cancel for the turn under way; its open permission
// requests are answered cancelled, as the protocol asks of a client.
func (c *Conn) Cancel() error {
	c.mu.Lock()
	cur, sid := c.cur, c.session
	c.mu.Unlock()
	if cur == nil {
		return ErrNoTurn
	}
	c.transcribe("[cancel] sent session/cancel\n", true)
	// session/cancel first: the agent then learns of the cancel before it
	// reads the cancelled answers (the SDK processes notifications before
	// the responses that follow them), and ends its turn cancelled.
	err := c.conn.Cancel(c.ctx, sdk.CancelNotification{SessionId: sdk.SessionId(sid)})
	c.cancelAsks()
	return err
}

// Busy says whether a turn is under way, and how many prompts wait.
func (c *Conn) Busy() (turn bool, waiting int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil, len(c.queue)
}

// work sends the queued prompts one at a time, once the session is open.
func (c *Conn) work() {
	for {
		c.mu.Lock()
		for !c.closed && (!c.ready || len(c.queue) == 0) {
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		t := c.queue[0]
		c.queue = c.queue[1:]
		c.cur, t.started = t, time.Now()
		sid := c.session
		c.mu.Unlock()
		c.turn(t, sid)
	}
}

// turn runs one prompt to its stop reason.
func (c *Conn) turn(t *Turn, sid string) {
	c.emit(Event{Kind: EventTurnStarted, PromptID: t.ID})
	c.transcribe("> "+oneLine(t.Text)+"\n", true)
	resp, err := c.conn.Prompt(c.ctx, sdk.PromptRequest{SessionId: sdk.SessionId(sid), Prompt: []sdk.ContentBlock{sdk.TextBlock(t.Text)}})
	stop := string(resp.StopReason)
	switch {
	case err != nil && (c.ctx.Err() != nil || done(c.conn.Done())):
		stop = program.StopRunEnded // the run ended, or its stdout did
	case err != nil:
		stop = program.StopRefused
		c.transcribe("[error] "+reason(err)+"\n", true)
		t.add(program.TurnUpdate{Type: program.UpdateText, Text: "[error] " + reason(err) + "\n"})
	case stop == "":
		stop = "unknown"
	}
	c.endTurn(t, stop)
}

// endTurn ends the turn under way: its open requests are cancelled, the
// end is transcribed and told.
func (c *Conn) endTurn(t *Turn, stop string) {
	c.cancelAsks()
	c.mu.Lock()
	if c.cur == t {
		c.cur = nil
	}
	c.mu.Unlock()
	c.transcribe("", true) // the answer's last line is a line
	if stop != program.StopEndTurn {
		c.transcribe("[turn] "+stop+"\n", true)
	}
	d := time.Since(t.started)
	t.finish(stop)
	c.emit(Event{Kind: EventTurnEnded, PromptID: t.ID, StopReason: stop, Duration: d})
}

// current is the turn under way, if any.
func (c *Conn) current() *Turn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// CancelSession sends session/cancel whether or not a turn of this
// connection's is under way: after a daemon restart, the turn the earlier
// daemon had asked for may still run in the agent, and no answer to it can
// reach this one.
func (c *Conn) CancelSession() error {
	c.mu.Lock()
	sid := c.session
	c.mu.Unlock()
	if sid == "" {
		return ErrNoTurn
	}
	return c.conn.Cancel(c.ctx, sdk.CancelNotification{SessionId: sdk.SessionId(sid)})
}

func done(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
