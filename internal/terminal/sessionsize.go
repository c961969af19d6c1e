package terminal

import (
	"errors"
	"fmt"

	"github.com/tend-sh/tend/internal/program"
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

// resize records size as a's size, the latest; 0x0 leaves the size as it is.
func (s *Session) resize(a *attach, size vt.Size) error {
	if size.Cols == 0 && size.Rows == 0 {
		return nil
	}
	if err := size.Valid(); err != nil {
		return fmt.Errorf("%w: %v", program.ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.attaches[a]; !ok {
		return nil // detached meanwhile, or the instance came to rest
	}
	s.sized++
	a.size, a.sized = size, s.sized
	return s.applyLocked()
}

// sizeLocked is the size the attached clients give the terminal: the
// latest one's, or tty_size.
func (s *Session) sizeLocked() vt.Size {
	size, latest := s.base, uint64(0)
	for a := range s.attaches {
		if a.sized > latest {
			size, latest = a.size, a.sized
		}
	}
	return size
}

// applyLocked gives the current run's terminal (and the next run's) the
// size sizeLocked says, and repaints its clients when that changes it.
// Under s.mu, which orders it with every other change of the clients.
func (s *Session) applyLocked() error {
	s.size = s.sizeLocked()
	t := s.cur
	if t == nil || t.Size() == s.size {
		return nil
	}
	err := t.Resize(s.size)
	if errors.Is(err, ErrClosed) {
		return nil // the run ended meanwhile: the next one gets the size
	}
	if err == nil {
		t.Repaint()
	}
	return err
}
