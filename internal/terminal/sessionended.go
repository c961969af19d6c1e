package terminal

import (
	"time"
)

// The last screen of a run that ended while no daemon ran (or whose
// terminal was lost with the daemon that started it): no terminal of it
// is left, but its log holds the bytes it wrote. `tend screen` rebuilds
// the screen from the tail of them (at most ReplayMax, as for an adopted
// run), at tty_size, when it is first asked for: a daemon that starts
// with a thousand ended tty runs reads no log until someone looks
// (docs/terminal.md#a-daemon-that-goes-away).

// EndedBefore says the instance's last run, started at started, ended
// before this daemon began: its screen is to be rebuilt from its log.
// Nothing for a zero time (an intent record of an earlier tend).
func (s *Session) EndedBefore(started time.Time) {
	if s == nil || started.IsZero() {
		return
	}
	s.mu.Lock()
	if s.cur == nil {
		s.replayFrom = started
	}
	s.mu.Unlock()
}

// rebuilt is the terminal of the last screen Screen shows: the last run's
// (nil before any), rebuilt from the log first if it has to be.
func (s *Session) rebuilt() {
	s.mu.Lock()
	from, size := s.replayFrom, s.size
	s.mu.Unlock()
	if from.IsZero() {
		return
	}
	// The log's times are to the millisecond: the run's first record may
	// carry the millisecond it started in. Read without s.mu: it is the
	// disk.
	replay, at, cur := s.tail(from.Truncate(time.Millisecond))
	if cur != nil {
		cur.Close()
	}
	var t *Terminal
	if len(replay) > 0 {
		t, _ = Ended(Options{Size: size, History: s.history, Replay: replay, ReplayAt: at})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.replayFrom.Equal(from) || s.cur != nil {
		return // a run began meanwhile: its screen is the one to show
	}
	s.replayFrom = time.Time{}
	if t != nil {
		s.last = t
	}
}
