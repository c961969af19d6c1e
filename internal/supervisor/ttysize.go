package supervisor

import (
	"errors"
	"fmt"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// The terminal's size (docs/terminal.md#the-window-size), as tmux's
// `window-size latest`: while clients that size it are attached, the
// terminal has the size of the one that attached or resized last; when it
// detaches, that of the latest of the others; with none, tty_size again,
// so that what `tend screen` reads does not depend on who looked last and
// no client's size outlives its attach, into this run or the next. A
// client whose terminal reports no size (0x0) and a read-only one (as
// tmux's `ignore-size`: a watcher does not reflow the agent's screen
// under the one typing) do not count. Every change repaints the attached
// clients.

// resize records s as a's size, the latest; 0x0 leaves the size as it is.
func (h *TTY) resize(a *attach, s vt.Size) error {
	if s.Cols == 0 && s.Rows == 0 {
		return nil
	}
	if err := s.Valid(); err != nil {
		return fmt.Errorf("%w: %v", program.ErrInvalid, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.attaches[a]; !ok {
		return nil // detached meanwhile, or the instance came to rest
	}
	h.sized++
	a.size, a.sized = s, h.sized
	return h.applyLocked()
}

// sizeLocked is the size the attached clients give the terminal: the
// latest one's, or tty_size.
func (h *TTY) sizeLocked() vt.Size {
	size, latest := h.base, uint64(0)
	for a := range h.attaches {
		if a.sized > latest {
			size, latest = a.size, a.sized
		}
	}
	return size
}

// applyLocked gives the current run's terminal (and the next run's) the
// size sizeLocked says, and repaints its clients when that changes it.
// Under h.mu, which orders it with every other change of the clients.
func (h *TTY) applyLocked() error {
	h.size = h.sizeLocked()
	t := h.cur
	if t == nil || t.Size() == h.size {
		return nil
	}
	err := t.Resize(h.size)
	if errors.Is(err, terminal.ErrClosed) {
		return nil // the run ended meanwhile: the next one gets the size
	}
	if err == nil {
		t.Repaint()
	}
	return err
}
