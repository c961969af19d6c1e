package spawn

import (
	"bytes"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Output of a run with a terminal. The run writes into its terminal, not
// into pipes, and the terminal keeper (package keeper) reads it, always,
// and appends what it reads to the instance's log as records of stream
// tty: each read's bytes cut at its newlines, the rest a partial record,
// so the log holds all of it at once (a prompt without a newline
// included; a later daemon replays it into the screen) and the records
// give the stream back byte for byte. The daemon does not write a tty
// run's output: it follows the log (TTYFollow, TTYTail) and hands what it
// reads to the terminal's screen and to TTYOutput's function, which makes
// it the instance's activity and, with forward_output, forwards it as
// text lines (vt.TextLines). Two processes append to the log (the
// keeper its tty records, the daemon its notes): it is shared
// (NewTTYOutput).

// TTYControl is what the capture does with the follower of a run's
// terminal: Resume wakes it once the forwarded lines it handed on have
// been written (it stops handing more while they wait), and Pause
// (Freeze, for an upgrade) may stop it meanwhile.
type TTYControl interface {
	Pause() error
	Resume()
}

// ttyStream is the current run's terminal as the capture sees it.
type ttyStream struct {
	ctl    TTYControl
	paused bool // the follower was asked to wait for room; guarded by Output.mu
}

// ttyRead bounds what the follower hands on at once while forwarding.
const ttyRead = 16 << 10

// NewTTYOutput is NewOutput for an instance that runs in a terminal: the
// terminal keeper appends its runs' output to the log while the daemon
// appends its notes, so the log is shared (logfile.Options.Shared: each
// batch under an flock of the current file, rotated under it), and the
// daemon says Changed when the keeper says it wrote (Capture.Changed).
func NewTTYOutput(c *Capture, id string, l program.Logs) *Output { return newOutput(c, id, l, true) }

// Changed says the keeper wrote instance id's log: its followers (the
// screen's, tend logs -f) look at it now.
func (c *Capture) Changed(id string) {
	c.mu.Lock()
	e := c.logs[id]
	c.mu.Unlock()
	if e != nil {
		e.log.Changed()
	}
}

// LogBase is the base name of the instance's log files in state_dir/logs,
// for the keeper that appends to them.
func (o *Output) LogBase() string { return baseName(o.id) }

// TTYOutput returns the function the follower of the current run's
// terminal hands what it read from the log to, given ctl, its control.
// Each run's terminal gets its own. false asks the follower to hand no more
// until ctl's Resume: the forwarded lines wait for the writer.
func (o *Output) TTYOutput(ctl TTYControl) func(p []byte) bool {
	st := &ttyStream{ctl: ctl}
	if o.c != nil {
		o.mu.Lock()
		o.tty = st
		o.mu.Unlock()
	}
	return func(p []byte) bool { return o.takeTTY(st, p) }
}

// takeTTY takes what the run wrote to its terminal (in the log already):
// it is the instance's activity, and with forward_output it is framed for
// the writer to forward as text.
func (o *Output) takeTTY(st *ttyStream, p []byte) bool {
	now := time.Now()
	o.last.Store(now.UnixNano()) // terminal output is output, for idle_output_timeout
	if o.c == nil || o.c.opts.Forward == nil {
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
// it without o.mu.
func (o *Output) takeTTYResumeLocked() func() {
	if st := o.tty; st != nil && st.paused && !o.frozen {
		st.paused = false
		return st.ctl.Resume
	}
	return nil
}

// pauseTTY stops the current run's follower, if it has one, for Freeze;
// thawTTY wakes it (unless it waits for room: resume does that).
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

// writeTTY forwards what the run wrote to its terminal as text lines
// (the keeper wrote it to the log). On the writer's goroutine.
func (o *Output) writeTTY(data []byte, fwd *[]byte) {
	for len(data) > 0 {
		r := logfile.Record{Stream: logfile.TTY, Line: data}
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			r.Line, data = data[:i], data[i+1:]
		} else {
			r.Partial, data = true, nil
		}
		o.forwardTTY(r, fwd)
	}
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

// EndTTY says the current run's terminal has ended, and everything it
// held is in the log (the keeper said so): StreamEnds counts it as both of
// the run's streams once the forwarded text before it is written.
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
// its new screen (terminal.Options.Replay). It reads the log, and returns
// a Cursor just after what it returned, for the follower to go on from
// there (neither short nor doubled); the caller closes it. No Cursor when
// the log cannot be read.
func (o *Output) TTYTail(since time.Time, max int) ([]byte, time.Time, *logfile.Cursor) {
	if o.e == nil {
		return nil, time.Time{}, nil
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
	if err != nil {
		cur = nil
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out, last, cur
}

// TTYFollow returns a Cursor at the end of the instance's log, for the
// follower of a run about to start; nil without a log.
func (o *Output) TTYFollow() *logfile.Cursor {
	if o.e == nil {
		return nil
	}
	cur, err := logfile.Read([]logfile.Source{{ID: o.id, Log: o.e.log}}, logfile.Query{}, func(*logfile.Entry) error { return nil })
	if err != nil {
		return nil
	}
	return cur
}

// ttyTailRecords bounds the records TTYTail looks through.
const ttyTailRecords = 8192
