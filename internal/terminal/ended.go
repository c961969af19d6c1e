package terminal

import "github.com/tend-sh/tend/internal/terminal/vt"

// Ended makes the Terminal of a run that is over and whose master is gone
// (it ended while no daemon ran): no master and nothing to read, its
// screen rebuilt from opts.Replay (the tail of the run's log) as of
// opts.ReplayAt, at opts.Size. It reads as a closed terminal does: the
// screen is there, input and resizing are ErrClosed.
func Ended(opts Options) (*Terminal, error) {
	if opts.Size == (vt.Size{}) {
		opts.Size = vt.DefaultSize
	}
	if err := opts.Size.Valid(); err != nil {
		return nil, err
	}
	t := &Terminal{fd: -1, opts: opts, done: make(chan struct{}), clients: map[*Client]struct{}{}}
	t.scr = vt.NewScreen(opts.Size)
	t.scr.SetHistory(opts.History)
	if opts.Clock != nil {
		t.scr.SetClock(opts.Clock)
	}
	t.scr.Replay(opts.Replay, opts.ReplayAt)
	t.opts.Replay = nil
	t.chgAt.Store(t.scr.ChangedAt().UnixNano())
	t.end()
	return t, nil
}

// Repaint sends every attached client a fresh redraw of the screen after a
// resize, so that no client keeps a picture drawn for the old size. It
// comes after what the client had queued, not in its place: the screen it
// paints has those bytes drawn already, and a client that prints the
// run's bytes as they come (tend run -a --tty, inline, which shows only
// the first redraw) would otherwise never see them (a run that wrote and
// ended while its client's size was being applied). A client past its
// bound gets the redraw alone, as one that fell behind does.
func (t *Terminal) Repaint() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r []byte
	for c := range t.clients {
		c.mu.Lock()
		if !c.stale && !c.closed {
			if r == nil {
				r = t.scr.Redraw(nil)
			}
			if len(c.pend)+len(r) > c.max {
				c.stale, c.pend = true, c.pend[:0]
			} else {
				c.pend = append(c.pend, r...)
			}
		}
		c.mu.Unlock()
		c.poke()
	}
}
