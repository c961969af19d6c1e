package supervisor

import (
	"time"

	"github.com/tend-sh/tend/internal/terminal"
)

// The last screen of a run that ended while no daemon ran (or whose
// terminal was lost with the daemon that started it): no terminal of it
// is left, but its log holds the bytes it wrote. `tend screen` rebuilds
// the screen from the tail of them (at most replayMax, as for an adopted
// run), at tty_size, when it is first asked for: a daemon that starts
// with a thousand ended tty runs reads no log until someone looks
// (docs/terminal.md#a-daemon-that-goes-away).

// endedBefore says the instance's last run, started at started, ended
// before this daemon began: its screen is to be rebuilt from its log.
// Nothing for a zero time (an intent record of an earlier tend).
func (h *TTY) endedBefore(started time.Time) {
	if h == nil || started.IsZero() {
		return
	}
	h.mu.Lock()
	if h.cur == nil {
		h.replayFrom = started
	}
	h.mu.Unlock()
}

// rebuilt is the terminal of the last screen Screen shows: the last run's
// (nil before any), rebuilt from the log first if it has to be.
func (h *TTY) rebuilt() {
	h.mu.Lock()
	from, size := h.replayFrom, h.size
	h.mu.Unlock()
	if from.IsZero() {
		return
	}
	// The log's times are to the millisecond: the run's first record may
	// carry the millisecond it started in. Read without h.mu: it is the
	// disk.
	replay, at, cur := h.in.out.TTYTail(from.Truncate(time.Millisecond), replayMax)
	if cur != nil {
		cur.Close()
	}
	var t *terminal.Terminal
	if len(replay) > 0 {
		t, _ = terminal.Ended(terminal.Options{Size: size, History: h.in.spec.TtyHistory, Replay: replay, ReplayAt: at})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.replayFrom.Equal(from) || h.cur != nil {
		return // a run began meanwhile: its screen is the one to show
	}
	h.replayFrom = time.Time{}
	if t != nil {
		h.last = t
	}
}
