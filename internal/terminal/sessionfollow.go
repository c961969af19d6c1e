package terminal

import (
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
)

// The daemon's side of a run's terminal output. The keeper reads the
// master and appends what it reads to the instance's log; the daemon
// follows that log, from where the run began (or, for an adopted run,
// from exactly where the replayed tail ends), and hands the bytes, in
// order and each once, to the terminal (screen, clients) and to the
// capture (activity, forward_output). It is woken when the keeper says it
// wrote (the log's Changed, through its Cursor), and looks at the log
// every followPoll besides, in case a wake was lost with a keeper that
// died (docs/terminal.md#the-keeper).

// followPoll is how often a follower looks at its log without a wake: a
// wake is lost only with a keeper killed between its write and its word,
// and the next write wakes it anyway. Rare, so that a thousand idle
// terminals cost next to nothing.
const followPoll = 10 * time.Second

// follower feeds one run's terminal from the instance's log, on a
// goroutine of its own: it never holds the keeper or the instance loop.
type follower struct {
	t      *Terminal
	cur    *logfile.Cursor // owned by the goroutine
	out    func([]byte) bool
	wake   chan struct{} // Resume's; room for one: wakes coalesce
	stop   chan struct{}
	done   chan struct{}
	paused atomic.Bool // the capture asked to wait (forwarded lines behind), or Freeze
}

// startFollow starts feeding t from cur (a nil cur: from the log's end
// now).
func (s *Session) startFollow(t *Terminal, cur *logfile.Cursor) *follower {
	if cur == nil && s.log.Follow != nil {
		cur = s.log.Follow()
	}
	f := &follower{t: t, cur: cur, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.out = func([]byte) bool { return true }
	if s.log.Output != nil {
		f.out = s.log.Output(f)
	}
	go f.run()
	return f
}

// Pause implements FollowControl (spawn.TTYControl): no more is handed on until Resume.
func (f *follower) Pause() error {
	f.paused.Store(true)
	return nil
}

// Resume implements FollowControl (spawn.TTYControl).
func (f *follower) Resume() {
	f.paused.Store(false)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// end feeds what the log holds still, and stops: the caller knows the
// keeper has written all the run wrote (End's drained).
func (f *follower) end() {
	close(f.stop)
	<-f.done
}

func (f *follower) run() {
	defer close(f.done)
	if f.cur == nil {
		<-f.stop
		return
	}
	defer f.cur.Close()
	wrote := f.cur.C()
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	f.feed(false) // what was written before C was watched
	for {
		select {
		case <-f.stop:
			f.feed(true)
			return
		case <-wrote:
		case <-f.wake:
		case <-tick.C:
		}
		f.feed(false)
	}
}

// feed hands on what the log gained, until its end (or a pause; the last
// feed reads to the end whatever asks to wait).
func (f *follower) feed(last bool) {
	var b []byte
	for last || !f.paused.Load() {
		b = b[:0]
		more, err := f.cur.Visit(func(r *logfile.Record) {
			if r.Stream == logfile.TTY {
				b = append(b, r.Line...)
				if !r.Partial {
					b = append(b, '\n')
				}
			}
		})
		if err != nil {
			return
		}
		if len(b) > 0 {
			f.t.Feed(b)
			if !f.out(b) {
				f.paused.Store(true) // until the capture's Resume
			}
		}
		if !more {
			return
		}
	}
}
