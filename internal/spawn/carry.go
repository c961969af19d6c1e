package spawn

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/epoll"
	"github.com/tend-sh/tend/internal/logfile"
)

// Handing an instance's output over to the next daemon (tend upgrade).
// The old daemon freezes the output: its read ends leave the epoll loop
// (what the run writes meanwhile waits in the pipe, and a run that fills
// it blocks: nothing is dropped), what was read is written to the log,
// and each read end still open is brought into the process's table
// (epoll.Watch.Dup). The unfinished line of each stream goes with it, so
// a line written across the upgrade is one record. The next daemon reads
// on from the same descriptors (Adopt): the pipe's contents, whatever
// the run wrote during the exec included, come next.

// CarriedStream is one read end of a frozen output.
type CarriedStream struct {
	FD     int            `json:"-"`      // in the process's table, close-on-exec; the caller hands it over
	Stream logfile.Stream `json:"stream"` // stdout or stderr
}

// Carried is a frozen output's state for the next daemon.
type Carried struct {
	Streams []CarriedStream `json:"streams"`
	Parts   [2][]byte       `json:"parts,omitempty"` // the unfinished line of stdout and of stderr
	Last    time.Time       `json:"last,omitzero"`   // LastActivity
}

// Freeze stops reading the output, writes what was read to the log and
// returns the open read ends (copies in the process's table) with the
// unfinished lines. Thaw undoes it. The caller must not close the
// output meanwhile.
func (o *Output) Freeze() (Carried, error) {
	var c Carried
	if o.c == nil {
		return c, nil
	}
	o.mu.Lock()
	o.frozen = true
	sts := append([]*stream(nil), o.streams...)
	o.mu.Unlock()
	var errs []error
	for _, st := range sts {
		if err := st.w.PauseLocked(); err != nil { // a read under way ends first
			errs = append(errs, err)
		}
	}
	if err := o.pauseTTY(); err != nil { // a terminal's bytes wait in it for the next daemon
		errs = append(errs, err)
	}
	o.flush()
	for _, st := range sts {
		fd, err := st.w.Dup()
		if err != nil {
			continue // ended meanwhile: nothing more comes from it
		}
		c.Streams = append(c.Streams, CarriedStream{FD: fd, Stream: st.s})
	}
	w := o.e.w
	w.run.Lock() // the writer's: held by it until the batch that took the frames is written
	c.Parts[logfile.Stdout] = o.lines[logfile.Stdout].Part()
	c.Parts[logfile.Stderr] = o.lines[logfile.Stderr].Part()
	w.run.Unlock()
	c.Last = o.LastActivity()
	return c, errors.Join(errs...)
}

// Thaw reads the output again after Freeze (the upgrade did not happen).
func (o *Output) Thaw() {
	if o.c == nil {
		return
	}
	o.mu.Lock()
	o.frozen = false
	var ws []*epoll.Watch
	for _, st := range o.streams {
		if !st.paused { // paused by Freeze alone; one paused for want of room waits for it (resume)
			ws = append(ws, st.w)
		}
	}
	o.mu.Unlock()
	for _, w := range ws { // without o.mu: Resume waits for a handler in flight, which takes it
		_ = w.Resume()
	}
	o.thawTTY()
	o.resume(false)
}

// flush waits until the writer has taken every frame read so far; the
// batch that took them is written once the writer lets go of its run
// lock.
func (o *Output) flush() {
	for {
		o.mu.Lock()
		if len(o.pend) == 0 && !o.queued {
			o.mu.Unlock()
			break
		}
		queued := o.enqueueLocked()
		o.mu.Unlock()
		if !queued { // the writers have stopped: write here
			w := o.e.w
			w.run.Lock()
			w.flush(o)
			w.run.Unlock()
			continue
		}
		<-o.took
	}
}

// Adopt reads on from the read ends an earlier daemon of this process
// froze (Carried), its unfinished lines first. Adopt owns the
// descriptors, also on error.
func (o *Output) Adopt(c Carried) error {
	if o.c == nil {
		for _, s := range c.Streams {
			unix.Close(s.FD)
		}
		return nil
	}
	if !c.Last.IsZero() {
		o.last.Store(c.Last.UnixNano())
	}
	w := o.e.w
	w.run.Lock()
	o.lines[logfile.Stdout].SetPart(c.Parts[logfile.Stdout])
	o.lines[logfile.Stderr].SetPart(c.Parts[logfile.Stderr])
	w.run.Unlock()
	var errs []error
	for _, s := range c.Streams {
		errs = append(errs, o.watch(s.FD, s.Stream))
	}
	return errors.Join(errs...)
}
