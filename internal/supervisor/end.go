package supervisor

import (
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/restart"
)

// The end of a run, and what follows it.
//
// A restart that follows an exit at once is the path kill → fork is timed
// on, so it does only what the next run needs before the fork: the ended
// run's notify socket is retired and kept (health.go), its record in
// runs.json is left for the next one's to replace, and its events
// (exited, health_warn, backoff) are published once the next run's fork is
// handed to the forker thread (startRun), while the thread forks. They
// keep their order, and come before anything else the instance publishes:
// publish sends them first.

// finish ends the run whose leader st is, and whose processes are all gone.
func (in *Instance) finish(st reaper.Status) {
	r := in.cur
	in.endTTY(r.pid, r.started)
	in.endProtocol()
	in.cur = nil
	in.unrecorded = true
	in.disarm()
	in.stopHealth()
	in.retireNotify()
	in.forgetTree(st.PID)
	ex := program.Exit{PID: st.PID, MaxRSS: in.runPeak(st.MaxRSS), StartedAt: r.started, EndedAt: time.Now(), OOMKilled: in.oomKilled()}
	if st.Adopted {
		ex.Unknown = true
	} else if st.Wait.Signaled() {
		ex.Signaled, ex.Signal = true, st.Wait.Signal()
	} else {
		ex.Code = st.Wait.ExitStatus()
	}
	in.woke = st.Woke
	in.ended(ex, r.intent)
}

// ended applies the restart policy to one end of a run and acts on it, with
// the events in docs/events.md's order: exited, health_warn, backoff or
// gave_up. For a restart at once they wait for its fork (see above).
func (in *Instance) ended(ex program.Exit, intent restart.Intent) {
	if in.removing {
		intent = restart.IntentStop
	}
	now := time.Now()
	d := restart.Decide(in.spec, &in.hist, ex, intent, now, in.deps.Rand)
	in.lastExit = &program.LastExit{Code: ex.CodePtr(), Signal: ex.SignalPtr(), LikelyCause: d.Cause, At: program.Time{Time: now}}
	if in.tty != nil { // only a tty run's last screen is rebuilt from it: other records stay as small
		in.lastStart = ex.StartedAt
	}
	atOnce := d.Next == restart.NextRestart && d.Delay <= 0
	switch d.Next { // journaled before anything announces it
	case restart.NextFatal:
		in.commitVerdict(program.StateFatal)
	case restart.NextExited:
		in.commitVerdict(program.StateExited)
	}
	post := in.publish
	if atOnce {
		post = in.holdEvent
	}
	post(program.KindExited, &program.Exited{
		PID: ex.PID, Code: ex.CodePtr(), Signal: ex.SignalPtr(),
		RunDurationMS: ex.Duration().Milliseconds(), LikelyCause: d.Cause,
		CrashCount: d.CrashCount, MaxRSSBytes: ex.MaxRSS,
	})
	if d.Warn != nil {
		post(program.KindHealthWarn, d.Warn)
	}
	in.ttyEnded(ex, d)
	switch d.Next {
	case restart.NextRestart:
		post(program.KindBackoff, d.Backoff)
		if atOnce {
			// On the loop's next turn: a stop can still come first. The
			// ended run's notify socket and record are the next one's.
			in.spawnDue = true
			in.state = program.StateStarting
			return
		}
		in.letGoOfRun()
		in.state, in.backoff, in.nextStart = program.StateBackoff, d.Backoff, now.Add(d.Delay)
		in.arm(d.Delay)
	case restart.NextFatal:
		in.publish(program.KindGaveUp, d.GaveUp)
		in.settle(program.StateFatal)
	case restart.NextExited:
		in.settle(program.StateExited)
	case restart.NextStopped:
		in.settle(program.StateStopped)
	}
}

// settle puts the instance at rest in state.
func (in *Instance) settle(state string) {
	in.letGoOfRun()
	in.disarm()
	if state != program.StateStopped || in.state != program.StateExited && in.state != program.StateFatal {
		in.state = state // a stop leaves an ended instance as it ended
	}
	in.backoff, in.nextStart = nil, time.Time{}
	in.ttyAtRest()
}

// letGoOfRun releases what an ended run left for a restart at once, when
// none follows: its notify socket (a stopped instance holds no
// descriptor), and its record in runs.json.
func (in *Instance) letGoOfRun() {
	if in.cur != nil {
		return
	}
	in.closeNotify()
	if in.unrecorded {
		in.record()
	}
}

// publish publishes an event of the instance's, after those held for a
// restart's fork.
func (in *Instance) publish(kind string, data any) {
	in.publishLater()
	in.emit(kind, data)
}

// holdEvent keeps an event of the run that ended for publishLater.
func (in *Instance) holdEvent(kind string, data any) {
	if in.later == nil {
		in.later = make([]program.Event, 0, 3) // exited, health_warn, backoff
	}
	in.later = append(in.later, program.Event{Kind: kind, Data: data})
}

// publishLater publishes the events holdEvent kept, in order. Nothing is
// kept between restarts: an instance at rest holds no slice.
func (in *Instance) publishLater() {
	later := in.later
	in.later = nil
	for _, e := range later {
		in.emit(e.Kind, e.Data)
	}
}

func (in *Instance) emit(kind string, data any) {
	in.deps.Publish(program.Event{Kind: kind, ID: in.id, Program: in.spec.Name, Labels: in.spec.Labels, Data: data})
	if kind == program.KindExited {
		if !in.woke.IsZero() && in.deps.Detected != nil {
			in.deps.Detected(time.Since(in.woke))
		}
		in.woke = time.Time{}
	}
}
