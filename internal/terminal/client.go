package terminal

import (
	"context"
	"io"
	"sync"
)

// Client is one attached viewer of a terminal (a `tend attach`, a browser
// tab): a bounded queue of the bytes to send it, filled by the terminal's
// Feed and emptied by the client's own goroutine through Next. A client
// that falls behind by more than its bound loses what it missed and is
// sent a fresh redraw of the screen instead, so it never slows Feed
// or the other clients.
//
// A Client outlives the terminal it is attached to: Terminal.MoveClients
// hands it to the next run's terminal, which sends it that screen.
type Client struct {
	wake chan struct{} // room for one: a push while the client is busy is not lost

	mu     sync.Mutex // guards what follows; taken after the terminal's mu, never before
	term   *Terminal  // attached to; nil when not
	pend   []byte     // bytes to send, in order
	out    []byte     // what Next returned last: the caller may still use it
	max    int
	stale  bool // pend was dropped: the next Next sends a redraw
	closed bool
}

// NewClient returns a client that may have max bytes waiting (0: the
// terminal's ClientBuffer).
func NewClient(max int) *Client {
	return &Client{wake: make(chan struct{}, 1), max: max}
}

func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// push queues p, or marks the client stale when it would overflow. Under
// the terminal's mu.
func (c *Client) push(p []byte) {
	c.mu.Lock()
	if !c.stale && !c.closed {
		if len(c.pend)+len(p) > c.max {
			c.stale, c.pend = true, c.pend[:0]
		} else {
			c.pend = append(c.pend, p...)
		}
	}
	c.mu.Unlock()
	c.poke()
}

// Next waits for bytes to send and returns them: the terminal's output in
// order, a redraw after an attach or after falling behind, notices. The
// slice is valid until the next call. After Close it returns what was
// queued, then io.EOF.
func (c *Client) Next(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		if c.stale {
			t := c.term
			c.mu.Unlock()
			if t != nil {
				t.refresh(c)
			} else {
				c.mu.Lock()
				c.stale = false
				c.mu.Unlock()
			}
			continue
		}
		if len(c.pend) > 0 {
			c.out, c.pend = c.pend, c.out[:0]
			if cap(c.pend) > 64<<10 { // a burst's buffer is not kept for good
				c.pend = nil
			}
			out := c.out
			c.mu.Unlock()
			return out, nil
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, io.EOF
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close detaches the client; Next returns io.EOF once it has returned
// what was queued.
func (c *Client) Close() {
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil {
		t.Detach(c)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.poke()
}

// Attach adds c to the terminal's clients (detaching it from another
// terminal first) and queues a redraw of the screen: the client sees the
// screen at once, then everything the program writes from then on.
func (t *Terminal) Attach(c *Client) {
	c.mu.Lock()
	old := c.term
	c.mu.Unlock()
	if old != nil && old != t {
		old.Detach(c)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.max <= 0 {
		c.max = t.opts.ClientBuffer
	}
	c.term = t
	c.pend = t.scr.Redraw(c.pend)
	c.stale = false
	t.clients[c] = struct{}{}
	c.poke()
}

// Detach removes c from the terminal's clients; what c had queued stays
// queued.
func (t *Terminal) Detach(c *Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, c)
	c.mu.Lock()
	if c.term == t {
		c.term = nil
	}
	c.mu.Unlock()
}

// refresh replaces what c had queued with a redraw, if c is still
// attached here and still stale.
func (t *Terminal) refresh(c *Client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term == t && c.stale {
		c.pend = t.scr.Redraw(c.pend[:0])
	}
	c.stale = false
}

// Clients is how many clients are attached.
func (t *Terminal) Clients() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

// MoveClients attaches every client of t to next (a new run's terminal):
// each is sent next's screen.
func (t *Terminal) MoveClients(next *Terminal) {
	t.mu.Lock()
	var cs []*Client
	for c := range t.clients {
		cs = append(cs, c)
		c.mu.Lock()
		c.term = nil
		c.mu.Unlock()
	}
	clear(t.clients)
	t.mu.Unlock()
	for _, c := range cs {
		next.Attach(c)
	}
}

// Notice sends every attached client a line of tend's own, on a line of
// its own ("[tend] planner:0 exited: exit 1 (runtime_error), crash 2 of
// 5; next run in 2s"). It is not part of the screen.
func (t *Terminal) Notice(line string) {
	b := make([]byte, 0, len(line)+12)
	b = append(append(append(b, "\r\n\x1b[0m"...), line...), "\r\n"...)
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.clients {
		c.push(b)
	}
}

// CloseClients closes every attached client: the instance is gone.
func (t *Terminal) CloseClients() {
	t.mu.Lock()
	var cs []*Client
	for c := range t.clients {
		cs = append(cs, c)
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}
