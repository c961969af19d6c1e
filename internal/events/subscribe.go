package events

import (
	"fmt"
	"slices"

	"github.com/tend-sh/tend/internal/program"
)

// Subscription is one reader of the log: every event with seq > since, in
// seq order, on C. It satisfies api.Subscription.
//
// Backlog events are read back from the audit files, so their Data is a
// pointer to the kind's payload type (*program.Spawned); live events carry
// the Data given to Publish as it was. Both marshal to the same JSON.
//
// Who sends on and closes out: while the backlog is read, the subscription's
// backfill goroutine alone (live events wait in pending); once it has handed
// over (live is set), Publish and the closers, all holding the log's mu.
type Subscription struct {
	log   *Log
	since uint64
	out   chan program.Event
	done  chan struct{} // closed by closeLocked; stops the backfill

	live      bool            // events go straight to out; guarded by log.mu
	pending   []program.Event // live events that arrived during the backlog; guarded by log.mu
	closed    bool            // Close or Log.Close was called; guarded by log.mu
	cut       bool            // cut off for being slow; guarded by log.mu
	outClosed bool            // out is closed (live phase only); guarded by log.mu
	err       error           // the backlog could not be read; guarded by log.mu
}

// Subscribe returns a subscription to every event with seq > since: first
// the backlog from the audit files, then live events, without gap or
// duplicate. The backlog is read by a goroutine of the subscription, so
// Subscribe does not wait for the disk. After Close of the log the
// subscription's channel is closed at once.
func (l *Log) Subscribe(since uint64) *Subscription {
	s := &Subscription{
		log:   l,
		since: since,
		out:   make(chan program.Event, l.buffer),
		done:  make(chan struct{}),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.live = true
		s.closeLocked()
		return s
	}
	// Registered under the lock that assigns seqs: every event <= upto is
	// already in the files, every later one reaches this subscription.
	upto := l.seq
	l.subs = append(l.subs, s)
	if since >= upto {
		s.live = true
		return s
	}
	l.filling[s] = struct{}{}
	l.backfills.Add(1)
	go s.backfill(upto)
	return s
}

// C returns the channel of events. It is closed when the subscription is
// cut off, closed, the log is closed, or the backlog cannot be read (Err).
func (s *Subscription) C() <-chan program.Event { return s.out }

// CutOff reports whether the log dropped this subscriber for being slow.
func (s *Subscription) CutOff() bool {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.cut
}

// Err returns the error that ended the subscription while reading its
// backlog from the audit files, or nil.
func (s *Subscription) Err() error {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.err
}

// Close ends the subscription; C closes (after the buffered events). It is
// idempotent and safe to call concurrently with Publish.
func (s *Subscription) Close() {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	s.log.unsubscribeLocked(s)
	close(s.done)
	s.closeOutLocked()
}

// closeOutLocked closes out if the caller may: in the live phase. In the
// backlog phase the backfill goroutine closes it when it is done.
func (s *Subscription) closeOutLocked() {
	if s.live && !s.outClosed {
		s.outClosed = true
		close(s.out)
	}
}

// unsubscribeLocked stops Publish from delivering to s. It builds a new
// slice: Publish may be ranging over the old one.
func (l *Log) unsubscribeLocked(s *Subscription) {
	if i := slices.Index(l.subs, s); i >= 0 {
		l.subs = slices.Concat(l.subs[:i], l.subs[i+1:])
	}
}

// deliverLocked hands a new event to the subscriber without blocking, or
// cuts it off when its buffer is full. Called by Publish.
func (s *Subscription) deliverLocked(e program.Event) {
	if e.Seq <= s.since {
		return
	}
	if !s.live {
		if len(s.pending) < s.log.buffer {
			s.pending = append(s.pending, e)
			return
		}
	} else {
		select {
		case s.out <- e:
			return
		default:
		}
	}
	s.cut = true
	s.log.cutOffs.Add(1)
	s.log.unsubscribeLocked(s)
	s.closeOutLocked()
}

// backfill sends the backlog, the events in (since, upto], from the audit
// files, then the live events that arrived meanwhile, then hands over to
// Publish. If the subscription is cut off or closed meanwhile, it closes out
// after what it has to send (or at once, if closed).
func (s *Subscription) backfill(upto uint64) {
	defer s.log.backfills.Done()
	defer func() {
		s.log.mu.Lock()
		delete(s.log.filling, s)
		s.log.mu.Unlock()
	}()
	open := true
	err := scan(s.log.dir, s.since, func(e program.Event) bool {
		if e.Seq > upto {
			return false
		}
		open = s.send(e)
		return open
	})
	if err != nil {
		// Carrying on would leave a gap; ending lets the reader retry.
		s.log.mu.Lock()
		s.err = fmt.Errorf("events: backlog: %w", err)
		s.log.unsubscribeLocked(s)
		s.log.mu.Unlock()
		close(s.out)
		return
	}
	for open {
		batch, handedOver := s.takePending()
		if handedOver {
			return
		}
		if len(batch) == 0 {
			break
		}
		for _, e := range batch {
			if open = s.send(e); !open {
				break
			}
		}
	}
	close(s.out)
}

// send blocks until the reader takes e or the subscription is closed.
func (s *Subscription) send(e program.Event) bool {
	select {
	case s.out <- e:
		return true
	case <-s.done:
		return false
	}
}

// takePending returns the live events waiting for the backfill. When there
// are none and the subscription goes on, it hands out over to Publish.
func (s *Subscription) takePending() (batch []program.Event, handedOver bool) {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	batch, s.pending = s.pending, nil
	if len(batch) == 0 && !s.closed && !s.cut {
		s.live = true
		return nil, true
	}
	return batch, false
}
