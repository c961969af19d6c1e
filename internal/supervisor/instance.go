// Package supervisor runs one goroutine per instance that owns its state
// machine (stopped, starting, running, backoff, stopping, exited, fatal): it
// starts runs through spawn, receives their exits from the reaper, asks
// package restart what each end means, and publishes the events. A Manager
// holds the instances of every program and routes operator commands to them.
//
// The supervisor knows nothing of the API or the broker: it is handed a
// Publish function for events and an Update function for its snapshots.
package supervisor

import (
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
)

// Deps is what every instance is handed.
type Deps struct {
	Reaper    *reaper.Reaper
	Publish   func(program.Event)    // numbers, logs and fans out an event; must not block long
	Update    func(program.Snapshot) // the instance's latest state, for the broker
	Now       func() time.Time       // clock for accounting (default time.Now)
	Rand      func() float64         // backoff jitter source in [0,1)
	Capture   *spawn.Capture         // where the runs' output goes (log files, FIFOs, forwarding); nil = discarded
	NotifyDir string                 // where notify sockets go; "" = no notify sockets
	// Record is told of every run put in place (and pid 0 when none is), so
	// a later daemon can adopt what this one leaves running.
	Record   func(id string, pid, run int, started time.Time)
	Tree     Tree                // reads a run's tree RSS for max_rss; nil = no memory watchdog
	Dropped  func()              // counts a notify message dropped because the instance was busy
	Detected func(time.Duration) // observes each exit's detection latency: reaper wake-up to exited event
}

// Tree reads the summed RSS of a run's process tree (package proctree).
type Tree interface {
	Sample(leader int, maxAge time.Duration) ([]program.Process, string, int64)
}

type cmdKind int

const (
	cmdStart cmdKind = iota
	cmdStop
	cmdRestart
	cmdRemove
)

type command struct {
	kind  cmdKind
	reply chan struct{} // closed when done: at once, or once stopped for stop/remove
}

// run is the process currently in place, from spawn to reaped exit.
type run struct {
	pid       int
	n         int
	started   time.Time
	intent    restart.Intent // what tend meant, if it is ending this run
	signalled bool           // stop_signal sent; the escalation timer is armed
}

// Instance supervises one instance of a program. Its fields below the
// channels are owned by its loop goroutine; other goroutines only send
// commands.
type Instance struct {
	id    string
	k     int
	deps  Deps
	cmds  chan command
	exits chan reaper.Status // from the reaper; one exit per run, never more than one pending
	done  chan struct{}      // closed when the loop returns

	spec      *program.Spec
	out       *spawn.Output
	hist      restart.History
	state     string
	cur       *run
	runs      int
	lastExit  *program.LastExit
	backoff   *program.Backoff
	nextStart time.Time
	wake      *time.Timer     // backoff expiry, or stop-grace expiry of cur; nil until first armed
	waiters   []chan struct{} // stop and remove replies, due once the instance is at rest
	replies   []chan struct{} // due after the next report, so a caller sees the new state
	removing  bool
	adopted   bool      // took over a run of an earlier daemon at creation
	woke      time.Time // when the reaper woke for the exit being handled

	health // notify messages, readiness, the wedge and memory watchdogs
}

func newInstance(spec *program.Spec, k int, deps Deps) *Instance {
	id := program.InstanceID(spec.Name, k)
	in := &Instance{
		id: id, k: k, deps: deps, spec: spec,
		cmds:  make(chan command),
		exits: make(chan reaper.Status, 2),
		done:  make(chan struct{}),
		out:   spawn.NewOutput(deps.Capture, id, spec.Logs),
		state: program.StateStopped,
	}
	in.openNotify()
	return in
}

func (in *Instance) loop() {
	defer close(in.done)
	in.report()
	for !in.removing || in.cur != nil {
		select {
		case c := <-in.cmds:
			in.handle(c)
		case st := <-in.exits:
			in.onExit(st)
		case <-in.wakeC():
			in.onWake()
		case m := <-in.notes:
			in.onNotify(*m)
		case <-in.tickC():
			in.checkHealth()
		case <-in.startC():
			in.onStartTimeout()
		case <-in.probeC():
			in.startProbe()
		case res := <-in.probeDone:
			in.onProbe(res)
		case o := <-in.mem.over:
			in.onOverMem(o)
		}
		in.report()
		for _, r := range in.replies {
			close(r)
		}
		in.replies = in.replies[:0]
	}
	in.closeHealth()
	in.out.Close()
}

// send hands c to the loop; false if the instance is gone.
func (in *Instance) send(c command) bool {
	select {
	case in.cmds <- c:
		return true
	case <-in.done:
		close(c.reply)
		return false
	}
}

func (in *Instance) handle(c command) {
	switch c.kind {
	case cmdStart:
		in.start()
		in.replies = append(in.replies, c.reply)
	case cmdRestart:
		if in.cur == nil {
			in.start()
		} else {
			in.end(restart.IntentOperatorRestart)
		}
		in.replies = append(in.replies, c.reply)
	case cmdStop, cmdRemove:
		in.removing = in.removing || c.kind == cmdRemove
		if in.cur == nil {
			in.settle(program.StateStopped)
			in.replies = append(in.replies, c.reply)
			return
		}
		in.end(restart.IntentStop)
		in.waiters = append(in.waiters, c.reply)
	}
}

// start spawns now, whatever the instance was doing short of running. An
// operator start of a fatal or exited instance is a fresh start.
func (in *Instance) start() {
	if in.cur != nil {
		if in.cur.intent == restart.IntentStop {
			in.cur.intent = restart.IntentOperatorRestart // come back after the stop
		}
		return
	}
	if in.state == program.StateFatal || in.state == program.StateExited {
		in.hist.CrashCount, in.hist.Degraded = 0, false
	}
	in.spawn()
}

// end asks the current run to stop for intent: stop_signal to its group now,
// SIGKILL to the same run after stop_grace.
func (in *Instance) end(intent restart.Intent) {
	in.endWith(intent, in.spec.StopSignal, in.spec.StopGrace)
}

// endWith ends the current run for intent with sig, then SIGKILL after grace.
func (in *Instance) endWith(intent restart.Intent, sig syscall.Signal, grace time.Duration) {
	r := in.cur
	if r.intent == restart.IntentNone || intent == restart.IntentStop {
		r.intent = intent
	}
	if r.signalled {
		return
	}
	r.signalled = true
	in.state = program.StateStopping
	in.stopHealth()
	_ = in.deps.Reaper.Signal(r.pid, sig, true)
	in.arm(grace)
}

func (in *Instance) onWake() {
	switch {
	case in.cur != nil && in.cur.signalled:
		// Grace is over. Signal only reaches this run if it is still
		// unreaped, never a run spawned since.
		_ = in.deps.Reaper.Signal(in.cur.pid, syscall.SIGKILL, true)
	case in.cur == nil && in.state == program.StateBackoff:
		in.spawn()
	}
}

// arm sets the wake timer, made on first use: most instances just run,
// and a thousand idle timers (and the waiter each adds to the loop's
// select) would be memory for nothing.
func (in *Instance) arm(d time.Duration) {
	if in.wake == nil {
		in.wake = time.NewTimer(d)
		return
	}
	in.wake.Reset(d) // since Go 1.23 Reset also drops a stale expiry
}

func (in *Instance) disarm() {
	if in.wake != nil {
		in.wake.Stop() // since Go 1.23 no stale expiry stays in C
	}
}

func (in *Instance) wakeC() <-chan time.Time {
	if in.wake == nil {
		return nil
	}
	return in.wake.C
}

func (in *Instance) spawn() {
	in.disarm()
	in.backoff, in.nextStart = nil, time.Time{}
	now := in.now()
	pid, err := spawn.Start(in.deps.Reaper, spawn.Request{
		Spec: in.spec, Env: in.runEnv(), Out: in.out,
		Owner: func(s reaper.Status) { in.exits <- s },
	})
	if err != nil {
		in.publish(program.KindSpawnFailed, &program.SpawnFailed{Error: err.Error(), Errno: spawn.Errno(err)})
		in.ended(program.Exit{SpawnErr: err, StartedAt: now, EndedAt: now}, restart.IntentNone)
		return
	}
	in.runs++
	in.cur = &run{pid: pid, n: in.runs, started: now}
	in.state = program.StateRunning
	in.record()
	in.publish(program.KindSpawned, &program.Spawned{PID: pid, Run: in.runs})
	in.startHealth(now)
}

func (in *Instance) onExit(st reaper.Status) {
	r := in.cur
	if r == nil || r.pid != st.PID {
		return // cannot happen: the reaper routes only this instance's runs
	}
	in.cur = nil
	in.record()
	in.disarm()
	in.stopHealth()
	ex := program.Exit{PID: st.PID, MaxRSS: st.MaxRSS, StartedAt: r.started, EndedAt: in.now()}
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
// the events in SPEC 11's order: exited, health_warn, backoff or gave_up.
func (in *Instance) ended(ex program.Exit, intent restart.Intent) {
	if in.removing {
		intent = restart.IntentStop
	}
	now := in.now()
	d := restart.Decide(in.spec, &in.hist, ex, intent, now, in.deps.Rand)
	in.lastExit = &program.LastExit{Code: ex.CodePtr(), Signal: ex.SignalPtr(), LikelyCause: d.Cause, At: program.Time{Time: now}}
	in.publish(program.KindExited, &program.Exited{
		PID: ex.PID, Code: ex.CodePtr(), Signal: ex.SignalPtr(),
		RunDurationMS: ex.Duration().Milliseconds(), LikelyCause: d.Cause,
		CrashCount: d.CrashCount, MaxRSSBytes: ex.MaxRSS,
	})
	if !in.woke.IsZero() && in.deps.Detected != nil {
		in.deps.Detected(time.Since(in.woke))
	}
	in.woke = time.Time{}
	if d.Warn != nil {
		in.publish(program.KindHealthWarn, d.Warn)
	}
	switch d.Next {
	case restart.NextRestart:
		in.publish(program.KindBackoff, d.Backoff)
		if d.Delay <= 0 {
			in.spawn()
			return
		}
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

// settle puts the instance at rest in state and releases stop waiters.
func (in *Instance) settle(state string) {
	in.disarm()
	if state != program.StateStopped || in.state != program.StateExited && in.state != program.StateFatal {
		in.state = state // a stop leaves an ended instance as it ended
	}
	in.backoff, in.nextStart = nil, time.Time{}
	in.replies = append(in.replies, in.waiters...)
	in.waiters = nil
}

func (in *Instance) publish(kind string, data any) {
	in.deps.Publish(program.Event{Kind: kind, ID: in.id, Program: in.spec.Name, Data: data})
}

// report hands the broker the instance's current state.
func (in *Instance) report() {
	st := program.Status{
		ID: in.id, Program: in.spec.Name, Instance: in.k, Agent: in.spec.Agent,
		State: in.state, Run: in.runs, CrashCount: in.hist.CrashCount,
		Degraded: in.hist.Degraded, Restarts: in.hist.Restarts, LastExit: in.lastExit,
		NextStartAt: program.Time{Time: in.nextStart},
	}
	stopping := ""
	if r := in.cur; r != nil {
		pid := r.pid
		st.PID, st.StartedAt = &pid, program.Time{Time: r.started}
		if r.signalled {
			stopping = stoppingFor[r.intent]
		}
	}
	in.reportHealth(&st)
	in.deps.Update(program.Snapshot{Status: st, Spec: in.spec, Backoff: in.backoff, Stopping: stopping, LastOutput: in.out.LastActivity, Turn: in.turnReport()})
}

// stoppingFor names why a run is being stopped, for the status's why.
var stoppingFor = map[restart.Intent]string{
	restart.IntentStop: "stop", restart.IntentOperatorRestart: "restart", restart.IntentWedgeRestart: "wedge",
	restart.IntentRSSDrain: "rss", restart.IntentStartTimeout: "start_timeout",
}

func (in *Instance) now() time.Time {
	if in.deps.Now != nil {
		return in.deps.Now()
	}
	return time.Now()
}
