package spawn

import (
	"bytes"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Output of a run with a terminal. The run writes into its terminal, not
// into pipes: the terminal (package terminal) reads the master on the
// epoll loop and hands every read to TTYOutput's function, which frames it
// into the instance's pending bytes as the pipes' handler does, with the
// same bounds. With no room it answers false: the terminal stops reading
// (the run blocks on a full terminal) until the writer has caught up and
// resume calls the terminal's Resume. Nothing is dropped.
//
// The log keeps the bytes as the run wrote them (stream tty): each read's
// bytes cut at its newlines, the rest a partial record, so the log holds
// all of it at once (a prompt without a newline included; a later daemon
// replays it into the screen) and the records give the stream back byte
// for byte. Forwarded lines are text (vt.TextLines).

// TTYControl is what the capture does with a run's terminal: stop reading
// it (Freeze, for an upgrade) and read on (after backpressure, or Thaw).
type TTYControl interface {
	Pause() error
	Resume()
}

// ttyStream is the current run's terminal as the capture sees it.
type ttyStream struct {
	ctl    TTYControl
	paused bool // the terminal was asked to stop reading for want of room; guarded by Output.mu
}

// ttyRead bounds one read of a terminal (the terminal's read chunk): a read
// is taken only while this much room is left.
const ttyRead = 16 << 10

// TTYOutput returns the function the current run's terminal hands each
// read to (terminal.Options.Output), given ctl, that terminal's control.
// Each run's terminal gets its own.
func (o *Output) TTYOutput(ctl TTYControl) func(p []byte) bool {
	st := &ttyStream{ctl: ctl}
	if o.c != nil {
		o.mu.Lock()
		o.tty = st
		o.mu.Unlock()
	}
	return func(p []byte) bool { return o.takeTTY(st, p) }
}

// takeTTY frames what a terminal read; false asks it to stop reading.
func (o *Output) takeTTY(st *ttyStream, p []byte) bool {
	now := time.Now()
	o.last.Store(now.UnixNano()) // terminal output is output, for idle_output_timeout
	if o.c == nil {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return true // the instance is gone: nothing is kept for it
	}
	o.frameLocked(logfile.TTY, p, now)
	o.enqueueLocked()
	if len(o.pend)+frameHdr+ttyRead <= pendMax && o.c.used.Load() < o.c.opts.Budget {
		return true
	}
	st.paused = true
	if !o.waiting {
		o.waiting = true
		o.c.addWaiting(o)
	}
	return false
}

// takeTTYResumeLocked takes the resume of the current terminal if it was
// paused, unless the output is frozen (Thaw resumes it); the caller calls
// it without o.mu (it waits for the epoll loop, whose handler takes o.mu).
func (o *Output) takeTTYResumeLocked() func() {
	if st := o.tty; st != nil && st.paused && !o.frozen {
		st.paused = false
		return st.ctl.Resume
	}
	return nil
}

// pauseTTY stops reading the current run's terminal, if it has one, for
// Freeze; thawTTY reads on (unless it waits for room: resume does that).
func (o *Output) pauseTTY() error {
	o.mu.Lock()
	st := o.tty
	o.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.ctl.Pause()
}

func (o *Output) thawTTY() {
	o.mu.Lock()
	st := o.tty
	paused := st != nil && st.paused
	o.mu.Unlock()
	if st != nil && !paused {
		st.ctl.Resume()
	}
}

// writeTTY stores one read of a terminal as records: a record per line,
// the bytes after the last newline as a partial one. With fwd non-nil, the
// text lines it completes are appended to it as forwarded lines. On the
// writer's goroutine.
func (o *Output) writeTTY(log *logfile.Log, ts time.Time, data []byte, fwd *[]byte) error {
	var err error
	for len(data) > 0 {
		r := logfile.Record{TS: ts, Stream: logfile.TTY, Line: data}
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			r.Line, data = data[:i], data[i+1:]
		} else {
			r.Partial, data = true, nil
		}
		if e := log.Add(r); e != nil && err == nil {
			err = e
		}
		if fwd != nil {
			o.forwardTTY(r, fwd)
		}
	}
	return err
}

// forwardTTY turns a tty record into forwarded text lines.
func (o *Output) forwardTTY(r logfile.Record, fwd *[]byte) {
	if o.ttyText == nil {
		o.ttyText = vt.NewTextLines(logfile.DefaultLineMax)
	}
	emit := func(line []byte) {
		*fwd = append(append(append(*fwd, o.id...), " | "...), line...)
		*fwd = append(*fwd, '\n')
	}
	o.ttyText.Write(r.Line, emit)
	if !r.Partial {
		o.ttyText.Write([]byte{'\n'}, emit)
	}
}

// EndTTY says the current run's terminal has ended (closed, everything it
// held read): its end is written after the last of its bytes, which
// StreamEnds counts as both of the run's streams.
func (o *Output) EndTTY() {
	if o.c == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.frameLocked(logfile.TTY|endFlag, nil, time.Now())
	o.enqueueLocked()
}

// endTTYText forwards the unfinished text line of the ended terminal. On
// the writer's goroutine.
func (o *Output) endTTYText(fwd *[]byte) {
	if o.ttyText == nil {
		return
	}
	o.ttyText.Flush(func(line []byte) {
		if fwd != nil {
			*fwd = append(append(append(*fwd, o.id...), " | "...), line...)
			*fwd = append(*fwd, '\n')
		}
	})
}

// TTYTail returns what the instance's runs wrote to their terminals at or
// after since, as the bytes they wrote, at most max of the newest, and
// when the last of it was written: what a daemon that adopts a run feeds
// its new screen (terminal.Options.Replay). It reads the log.
func (o *Output) TTYTail(since time.Time, max int) ([]byte, time.Time) {
	if o.e == nil {
		return nil, time.Time{}
	}
	var out []byte
	var last time.Time
	src := []logfile.Source{{ID: o.id, Log: o.e.log}}
	cur, err := logfile.Read(src, logfile.Query{Tail: ttyTailRecords, Since: since}, func(e *logfile.Entry) error {
		if e.Stream != logfile.TTY {
			return nil
		}
		out = append(out, e.Line...)
		if !e.Partial {
			out = append(out, '\n')
		}
		if len(out) > 2*max {
			out = append(out[:0], out[len(out)-max:]...)
		}
		last = e.TS
		return nil
	})
	if err == nil {
		cur.Close()
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out, last
}

// ttyTailRecords bounds the records TTYTail looks through.
const ttyTailRecords = 8192
