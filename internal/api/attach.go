package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// Attached adds: POST /v1/programs?attach=1 (tend run --attach of a
// program without a terminal). One request adds the program, starts it and
// follows its first run to the end, as docker run does with create, attach,
// start and wait: an answer of JSON lines (201, application/x-ndjson),
//
//	{"name": "run-1a2b3c4d", "ids": ["run-1a2b3c4d:0"]}
//	{"ts": "…", "id": "run-1a2b3c4d:0", "stream": "stdout", "line": "hello"}
//	…
//	{"exit": {"code": 3, "signal": null, "likely_cause": "runtime_error", "status": 3}}
//
// the output as GET /v1/logs gives it in JSON, stdout and stderr merged in
// time order, and last how the run ended (program.RunEnd). It is one
// request so that nothing can come between the add and the attach: the
// program's logs are held (Backend.Hold) from before it exists until this
// answer has read them to the end, so a remove_on_exit program that ends
// at once is still read whole before its logs go. A client that goes
// away leaves the program running (and removed once it ends, with
// remove_on_exit); the answer ends without an exit line when the instance
// goes before its run ends, or the daemon stops. With raw=1 a terminal's
// output (stream tty) comes as the bytes the program wrote, as GET
// /v1/logs?raw=1 gives it: tend run -a --tty prints them when its run
// ended before its terminal could be attached to.

// Bounds of the wait for a run's last output, after its exit is known.
const (
	settleEvery = 2 * time.Millisecond
	settleMax   = 2 * time.Second // a stream that never ends (cannot happen: containment) does not hang the client
)

// attachLine is one line of the answer that is not output.
type attachLine struct {
	Exit  *program.RunEnd `json:"exit,omitempty"`
	Error string          `json:"error,omitempty"`
}

func (s *Server) addAttached(w http.ResponseWriter, r *http.Request, spec program.Spec, body []byte) error {
	switch {
	case spec.Instances != 1:
		return badRequest(fmt.Sprintf("attach follows one run: instances must be 1, not %d", spec.Instances))
	case !spec.Autostart:
		return badRequest("attach follows the run it starts: autostart must be true")
	}
	raw, err := boolParam(r, "raw")
	if err != nil {
		return err
	}
	hold := s.b.Hold(spec.Name)
	defer hold.Release()
	since := s.ev.LastSeq()
	from := time.Now().Truncate(time.Millisecond)
	ids, err := s.b.Add(spec, body)
	if err != nil {
		return err
	}
	id := ids[0]
	srcs, err := s.b.LogSources(id, nil)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusCreated)
	a := &attachment{s: s, r: r, id: id, since: since, hold: hold, removes: spec.RemoveOnExit,
		lw: &lineWriter{bw: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), lr: logRequest{json: true, raw: raw}}}
	a.writeJSON(program.Added{Name: spec.Name, IDs: ids})
	// Lines the run wrote before this read are in the tail: every line
	// since the add (a program of this name removed earlier may have left
	// older ones).
	cur, err := logfile.Read(srcs, logfile.Query{Tail: maxTail, Since: from}, a.lw.line)
	if err == nil {
		err = a.lw.flush()
	}
	if err != nil {
		return nil // the client went away
	}
	defer cur.Close()
	a.follow(cur)
	return nil
}

// attachment is one attached answer in progress; its handler's goroutine
// owns it.
type attachment struct {
	s       *Server
	r       *http.Request
	id      string
	hold    Hold
	removes bool   // remove_on_exit: the answer ends once the program is gone
	since   uint64 // the last event before the add
	lw      *lineWriter
	end     *program.RunEnd // the run's end, once its exited event came
	errno   string          // the spawn_failed event's, before its exited
	spawn   string
}

// follow sends the run's output until it has ended and all it wrote is
// sent, then the exit line.
func (a *attachment) follow(cur *logfile.Cursor) {
	sub := a.s.ev.Subscribe(a.since)
	defer func() { sub.Close() }()
	poll := time.NewTicker(a.s.poll) // logs not written here, and whether the instance is still there
	defer poll.Stop()
	var settle <-chan time.Time
	var deadline time.Time
	for {
		select {
		case <-a.r.Context().Done():
			return
		case <-a.s.done:
			return
		case e, ok := <-sub.C():
			if !ok {
				if !sub.CutOff() {
					return // the log closed: the daemon stops
				}
				sub = a.s.ev.Subscribe(a.since) // too slow a reader: resume where it was
				continue
			}
			a.since = e.Seq
			if a.event(e) {
				t := time.NewTicker(settleEvery)
				defer t.Stop()
				settle, deadline = t.C, time.Now().Add(settleMax)
			}
		case <-cur.C():
		case <-poll.C:
			if a.end == nil {
				if _, err := a.s.b.Status(a.id, nil); err != nil {
					a.drain(cur)
					a.writeJSON(attachLine{Error: a.id + " was removed before its run ended"})
					return
				}
			}
		case <-settle:
		}
		if !a.drain(cur) {
			return
		}
		if a.end != nil && (a.spawn != "" || a.s.b.OutputSettled(a.id) || time.Now().After(deadline)) {
			a.drain(cur)
			a.finish(cur)
			return
		}
	}
}

// removalWait bounds how long the answer waits for a remove_on_exit
// program's removal once its run has ended (it is quick: nothing is left
// to stop).
const removalWait = 10 * time.Second

// finish ends the answer with the exit line. For a remove_on_exit program
// that is after its removal, and after its logs are gone too (the hold's
// release removes them): when tend run --rm --attach returns, nothing of
// the program is left.
func (a *attachment) finish(cur *logfile.Cursor) {
	if a.removes {
		t := time.NewTimer(removalWait)
		defer t.Stop()
		select {
		case <-a.hold.Removed():
			a.drain(cur) // a last note of tend's own, written as the instance went
		case <-t.C:
		case <-a.r.Context().Done():
			return
		}
		a.hold.Release()
	}
	a.writeJSON(attachLine{Exit: a.end})
}

// event takes what the answer needs from e: the spawn failure and the
// first exited event of the instance. It reports the exit.
func (a *attachment) event(e program.Event) bool {
	if e.ID != a.id || a.end != nil {
		return false
	}
	switch d := e.Data.(type) {
	case *program.SpawnFailed:
		a.spawn, a.errno = d.Error, d.Errno
	case *program.Exited:
		a.end = &program.RunEnd{Code: d.Code, Signal: d.Signal, LikelyCause: d.LikelyCause, SpawnError: a.spawn, Errno: a.errno,
			Status: program.ExitStatus(d.Code, d.Signal, a.errno)}
		return true
	}
	return false
}

// drain sends every line written so far; false when the client is gone.
func (a *attachment) drain(cur *logfile.Cursor) bool {
	for {
		entries, more, err := cur.Next()
		if err != nil {
			return true
		}
		if len(entries) > 0 {
			if err := a.lw.write(entries); err != nil {
				return false
			}
		}
		if !more {
			return true
		}
	}
}

// writeJSON sends one line of the answer that is not output.
func (a *attachment) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	a.lw.bw.Write(append(b, '\n'))
	a.lw.flush()
}
