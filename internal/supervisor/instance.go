// Package supervisor runs one goroutine per instance that owns its state
// machine (stopped, starting, running, backoff, stopping, exited, fatal): it
// starts runs through spawn, receives their exits from the reaper, asks
// package restart what each end means, and publishes the events. A Manager
// holds the instances of every program and routes operator commands to them.
//
// An instance's goroutine runs only while it has something to do or to wait
// for (a timer, a probe): an instance whose run just runs has none, and
// whatever happens to it next (a command, the exit, a notify message, the
// group emptying, max_rss) starts one again. Ten thousand parked goroutines
// would hold 40 MB of stacks for nothing.
//
// Who owns what in an Instance:
//   - the loop goroutine (at most one at a time, started by the inbox;
//     before it, the creator, until letGo): every field not named below,
//     and the pending mail;
//   - the inbox's lock (inbox.go): what other goroutines deliver, and
//     whether a loop runs; every other goroutine reaches the instance
//     through a put, never through its fields;
//   - atomics (memState): the run the memory sampler samples and the peak
//     it saw, shared with the one sampler goroutine of the Manager;
//   - the member cache's lock (memberCache): the broker's samples of a
//     group's processes, taken on the broker's goroutines;
//   - set at creation and never changed: id, k, deps, spec, digest, out,
//     done, the inbox's channel, group, members.
//
// The supervisor knows nothing of the API or the broker: it is handed a
// Publish function for events and an Update function for its snapshots.
package supervisor

import (
	"runtime"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/terminal"
)

// Deps is what every instance is handed.
type Deps struct {
	Reaper  *reaper.Reaper
	Publish func(program.Event)    // numbers, logs and fans out an event; must not block long
	Update  func(program.Snapshot) // the instance's latest state, for the broker
	Rand    func() float64         // backoff jitter source in [0,1)
	Capture *spawn.Capture         // where the runs' output goes (log files, FIFOs, forwarding); nil = discarded
	// NotifyDir holds the instances' notify sockets (state_dir/notify);
	// "" = no notify sockets. ShortDir is a private directory with a short
	// path (statedir.Runtime) for the sockets that cannot live in NotifyDir:
	// a path past sun_path's 107 bytes, or a run of another user, who
	// cannot enter the 0700 state directory.
	NotifyDir, ShortDir string
	// Cgroups is the daemon's cgroup tree: each instance gets a group in
	// it (docs/containment.md). Nil: no cgroups, runs are tracked by process group and
	// tree.
	Cgroups *cgroup.Tree
	// Record is told of every run put in place (and pid 0 when none is), so
	// a later daemon can adopt what this one leaves running.
	Record func(id string, pid, run int, started time.Time)
	// Intents is the intent record (state_dir/intent.json): each instance
	// keeps its state there for the next daemon, which restores it after
	// an unclean stop. nil: nothing is kept.
	Intents *kept.Intents
	Tree    Tree // reads a run's tree RSS for max_rss; nil = no memory watchdog
	// NotifyDrop hears each datagram a notify socket dropped (malformed,
	// oversized, a read error), for the metrics; it must not block.
	NotifyDrop func(error)
	Detected   func(time.Duration) // observes each exit's detection latency: reaper wake-up to exited event
	// Turned observes each protocol turn's end (its stop reason and
	// duration) and Answered each permission request's answer (who), for
	// the metrics; each must not block.
	Turned   func(stopReason string, d time.Duration)
	Version  string // tend's, for a protocol agent's clientInfo
	Answered func(by string)
	// Keeper reads tty runs' terminals into their logs, and holds them so
	// that they outlive the daemon (tty.go); nil: none, and a tty run does
	// not start (the resources error).
	Keeper Keeper
}

// Tree reads a run's process tree (package proctree): its summed RSS for
// max_rss, and, without cgroups, the members a stop must reach outside the
// run's process group.
type Tree interface {
	// Monitor returns the run's summed RSS, sampled afresh; it is called
	// every second for each max_rss run.
	Monitor(leader int) int64
	// Describe reads the processes pids (a cgroup's members), at most
	// proctree.MaxMembers of them; truncated says some were left out.
	Describe(pids []int, prev []program.Process) (procs []program.Process, rss int64, truncated bool)
	// Signal sends sig to the run's members outside its process group
	// (fresh while the leader lives, else as last seen); see proctree.
	Signal(leader int, sig syscall.Signal) (signalled int, left []int)
	// Forget drops what Monitor keeps of the run led by leader.
	Forget(leader int)
}

type cmdKind int

const (
	cmdStart cmdKind = iota
	cmdStop
	cmdRestart
	cmdRemove
)

// command is an operator's request. reply (capacity 1) gets exactly one
// value: with opts.Wait once the instance got where it was asked (true) or
// could not (false), else as soon as the command is taken.
type command struct {
	kind     cmdKind
	opts     program.ActOptions
	reply    chan bool
	operator bool   // the operator's own (tend start, stop, restart): journaled before it is applied
	refused  *error // set, before reply gets false, when the decision could not be journaled
}

// run is the process currently in place, from spawn to reaped exit.
type run struct {
	pid       int
	n         int // the instance's run number (spawned runs only)
	attempt   int // the instance's spawn attempt that made it
	started   time.Time
	intent    restart.Intent // what tend meant, if it is ending this run
	signalled bool           // stop_signal sent; the escalation timer is armed
	turnWait  time.Time      // an operator stop waits for the agent's turn to end until then
	reaped    *reaper.Status // the leader was collected; with cgroups the run ends once its group is empty
	adopted   bool           // an earlier daemon's run, held through a pidfd (not this process's child)
}

// Instance supervises one instance of a program. Other goroutines reach it
// only through its inbox; the rest belongs to its loop goroutine (see the
// package doc for the exceptions).
type Instance struct {
	id     string
	k      int
	deps   Deps
	spec   *program.Spec
	digest string // kept.SpecDigest of spec, for the intent record
	out    *spawn.Output
	done   chan struct{} // closed when the loop ends for good (the instance is removed)
	box    inbox         // what other goroutines deliver

	pending   mail // taken from the inbox, handled one item a turn, commands first
	hist      restart.History
	state     string
	cur       *run
	runs      int // runs spawned
	attempts  int // spawns tried, failed ones included
	lastExit  *program.LastExit
	lastStart time.Time // when the run of lastExit started (its tty log is replayed from there: terminal.Session.EndedBefore)
	backoff   *program.Backoff
	nextStart time.Time
	spawnDue  bool        // a restart without delay: the loop spawns on its next turn
	wake      *time.Timer // backoff expiry, stop-grace or turn-wait expiry of cur; nil until first armed
	wakeArmed bool        // wake will fire: the loop must stay on for it
	wakeAt    time.Time   // when, while wakeArmed
	freezing  *freezeReq  // an upgrade asked the instance to hold still (upgrade.go)
	waiters   []waiter    // commands waiting for the instance to get somewhere
	removing  bool
	adopted   bool      // took over a run of an earlier daemon at creation
	woke      time.Time // when the reaper woke for the exit being handled
	opStopped bool      // the operator stopped it (and has not started it since)
	kept      keptState // what the intent record was last handed
	// unrecorded: runs.json still names the run that ended; a restart at
	// once records its successor over it, anything else records none
	// (letGoOfRun).
	unrecorded bool
	later      []program.Event // the ended run's events, held for a restart's fork (end.go)

	health                        // notify messages, readiness, the wedge and memory watchdogs
	containment                   // the instance's cgroup
	tty         *terminal.Session // a tty instance's terminal across runs (tty.go), set at creation; nil without tty
	proto       *Protocol         // a protocol instance's connection and session (protocol.go); nil without protocol
}

// newInstance returns an instance its caller holds as its loop would: it
// may set it up (adopt a run, report it) while what comes meanwhile waits
// in the inbox, and then calls letGo.
func newInstance(spec *program.Spec, digest string, k int, deps Deps) *Instance {
	id := program.InstanceID(spec.Name, k)
	in := &Instance{
		id: id, k: k, deps: deps, spec: spec, digest: digest,
		done:  make(chan struct{}),
		box:   inbox{sig: make(chan struct{}, 1), active: true}, // held by its creator until letGo
		out:   newOutput(spec, id, deps),
		state: program.StateStopped,
	}
	in.kept = in.keptNow() // a new instance has nothing to keep until it changes
	in.initContainment()
	in.tty = newTTY(in)
	in.proto = newProtocol(in)
	return in
}

// loop is the instance's goroutine while it has work. Every turn handles
// one thing (a command, a delivery, a timer) and returns here, so an
// operator's stop is taken between any two steps, even of a program that
// fails to spawn in a loop. It returns when nothing is pending and nothing
// is armed (the next put starts it again), and for good once the instance
// is removed and its run has ended.
func (in *Instance) loop() {
	for {
		if c, ok := in.nextCmd(); ok {
			in.publishLater() // the restart they waited for did not come first
			in.handle(c)
			in.report()
			in.settleWaiters()
			continue
		}
		if in.removing && in.cur == nil {
			in.end4good()
			return
		}
		switch {
		case !in.pending.empty():
			in.deliver()
		case in.freezing != nil: // once what came before is handled, hold
			if in.takeMail(); in.pending.empty() {
				in.publishLater() // this daemon's to publish, not the next one's
				in.holdFrozen()
			}
			continue
		case in.idle() && in.park():
			return
		default:
			select {
			case <-in.box.sig:
				in.takeMail()
				continue // handled from the top, one item a turn
			case <-in.wakeC():
				in.wakeArmed = false
				in.onWake()
			case <-in.checkC():
				in.checkHealth()
			case <-in.startC():
				in.onStartTimeout()
			case <-in.probeC():
				in.startProbe()
			}
		}
		if in.spawnDue || len(in.pending.cmds) > 0 {
			continue // the spawn (or the commands) next: report their outcome, not this instant
		}
		in.report()
		in.settleWaiters()
	}
}

// idle says the loop waits for nothing only it would notice: no spawn due,
// no timer or ticker armed. (A probe in flight reports through the inbox.)
func (in *Instance) idle() bool {
	return !in.spawnDue && !in.wakeArmed &&
		in.checkT == nil && in.startT == nil && in.probeT == nil
}

// end4good ends the removed instance's loop for good: what it holds is
// released, and commands that come too late are answered as a gone
// instance answers them.
func (in *Instance) end4good() {
	in.publishLater()
	in.ttyAtRest()
	in.closeHealth()
	in.out.Close()
	in.removeGroup()
	in.releaseWaiters()
	late := in.closeBox()
	for _, c := range append(in.pending.cmds, late...) {
		c.reply <- c.kind == cmdStop || c.kind == cmdRemove // gone is stopped
	}
	in.pending = mail{}
	close(in.done)
}

func (in *Instance) handle(c command) {
	if err := in.commitDecision(c); err != nil {
		*c.refused = err // nothing changes: the decision is not kept, so not made
		c.reply <- false
		return
	}
	w := waiter{reply: c.reply, after: in.attempts}
	switch c.kind {
	case cmdStart:
		w.goal = goalRunning
		in.opStopped = false
		in.start()
	case cmdRestart:
		w.goal = goalNewRun
		in.opStopped = false
		if in.cur == nil {
			in.start()
		} else {
			in.end(restart.IntentOperatorRestart, c.opts.Now)
		}
	case cmdStop, cmdRemove:
		w.goal = goalRest
		if c.kind == cmdRemove && !in.removing {
			in.keepRetiring() // before the signal: the end to come is tend's
		}
		in.removing = in.removing || c.kind == cmdRemove
		in.opStopped = in.opStopped || c.kind == cmdStop
		if in.cur == nil {
			in.spawnDue = false
			in.settle(program.StateStopped)
		} else {
			in.end(restart.IntentStop, c.opts.Now)
		}
	}
	if !c.opts.Wait && c.kind != cmdRemove {
		w.goal = goalTaken // answered after the next report
	}
	in.waiters = append(in.waiters, w)
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

// end asks the current run to stop for an operator's intent: at once, or
// once the agent's turn ends (turn_grace, docs/operations.md#turn-aware-stop) unless now.
func (in *Instance) end(intent restart.Intent, now bool) {
	r := in.cur
	if !r.signalled && !now && in.startTurnWait(intent) {
		return
	}
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
	r.signalled, r.turnWait = true, time.Time{}
	in.state = program.StateStopping
	in.stopHealth()
	in.signalRun(r.pid, sig)
	in.arm(grace)
}

func (in *Instance) onWake() {
	switch {
	case in.spawnDue:
		in.spawnDue = false
		in.spawn()
	case in.cur != nil && in.cur.reaped != nil:
		in.recheckDrain()
	case in.cur != nil && in.cur.signalled:
		// Grace is over. Signal only reaches this run if it is still
		// unreaped, never a run spawned since.
		in.signalRun(in.cur.pid, syscall.SIGKILL)
	case in.cur != nil && !in.cur.turnWait.IsZero():
		in.checkTurnWait()
	case in.cur == nil && in.state == program.StateBackoff:
		in.spawn()
	}
}

// arm sets the wake timer, made on first use: most instances just run,
// and a thousand idle timers (and the waiter each adds to the loop's
// select) would be memory for nothing.
func (in *Instance) arm(d time.Duration) {
	in.wakeArmed, in.wakeAt = true, time.Now().Add(d)
	if in.wake == nil {
		in.wake = time.NewTimer(d)
		return
	}
	in.wake.Reset(d) // since Go 1.23 Reset also drops a stale expiry
}

func (in *Instance) disarm() {
	in.wakeArmed = false
	if in.wake != nil {
		in.wake.Stop() // since Go 1.23 no stale expiry stays in C
	}
}

// ready is a channel that is always ready: the loop's wake-up for a spawn
// due now, taken in turn with commands and exits rather than by recursion.
var ready = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

func (in *Instance) wakeC() <-chan time.Time {
	switch {
	case in.spawnDue:
		return ready
	case in.wake == nil:
		return nil
	}
	return in.wake.C
}

func (in *Instance) spawn() {
	if !in.waitSlot() {
		return // a stop came first: the loop handles it next, nothing started
	}
	defer func() { <-startSlots }()
	in.disarm()
	in.backoff, in.nextStart = nil, time.Time{}
	in.attempts++
	now := time.Now()
	pid, err := in.startRun()
	if err != nil {
		in.publish(program.KindSpawnFailed, &program.SpawnFailed{Error: err.Error(), Errno: spawn.Errno(err)})
		in.ended(program.Exit{SpawnErr: err, StartedAt: now, EndedAt: now}, restart.IntentNone)
		return
	}
	in.runs++
	in.cur = &run{pid: pid, n: in.runs, attempt: in.attempts, started: now}
	in.state = program.StateRunning
	in.record()
	in.publish(program.KindSpawned, &program.Spawned{PID: pid, Run: in.runs})
	in.startHealth(now)
}

// startSlots bounds how many runs are being started at once. A start is a
// string of blocking system calls (stat, mkfifo, open, bind, fork); when
// ten thousand instances start together, each call that blocks makes the
// Go runtime hand its CPU to a new OS thread, and the daemon would keep
// hundreds of idle threads (and their stacks) for good; and every waiting
// start would hold its notify socket open. Forks are serialised anyway
// (syscall.ForkLock, and the reaper's lock), so a few slots per core keep
// the cores busy with the rest.
var startSlots = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))

// waitSlot takes a start slot, still taking the inbox's mail meanwhile: a
// stop (or tend down) that comes while the instance waits its turn cancels
// the start (false) instead of waiting behind thousands of others. The rest
// of the mail is kept for after the start.
func (in *Instance) waitSlot() bool {
	for {
		select {
		case startSlots <- struct{}{}:
			return true
		case <-in.box.sig:
			if in.takeMail() {
				return false
			}
		}
	}
}

// startRun opens the run's notify socket, makes its cgroup ready and
// starts it in there. The events of the run before it, when it follows at
// once (ended), are published once its fork is handed over.
func (in *Instance) startRun() (int, error) {
	if err := in.openNotify(); err != nil {
		return 0, err
	}
	cg, err := in.prepareGroup()
	if err != nil {
		in.closeNotify()
		return 0, err
	}
	term, slave, err := in.openTTY()
	if err != nil {
		if cg != nil {
			cg.Close()
		}
		in.closeNotify()
		return 0, err
	}
	p, err := spawn.Begin(in.deps.Reaper, spawn.Request{
		Spec: in.spec, Env: in.runEnv(), Out: in.out, Cgroup: cg, TTY: slave,
		Owner: in.putExit, Protocol: in.proto != nil,
	})
	pid := 0
	if err == nil {
		in.publishLater() // the ended run's events, while the forker thread forks
		pid, err = p.Wait()
		stdin, stdout := p.Protocol()
		if err == nil {
			in.startProtocol(stdin, stdout, false, in.runs+1) // the number spawn gives it
		} else if stdin != nil {
			stdin.Close()
			stdout.Close()
		}
	}
	if cg != nil {
		cg.Close()
	}
	in.startedTTY(term, slave, pid, err)
	if err != nil {
		in.closeNotify()
	}
	return pid, err
}

func (in *Instance) onExit(st reaper.Status) {
	r := in.cur
	if r == nil || r.pid != st.PID || r.reaped != nil {
		return // cannot happen: the reaper routes only this instance's runs
	}
	if in.drain(st) {
		in.finish(st)
	}
}

// report hands the broker the instance's current state, after the
// events it follows from.
func (in *Instance) report() {
	in.publishLater()
	st := program.Status{
		ID: in.id, Program: in.spec.Name, Instance: in.k, Agent: in.spec.Agent,
		State: in.state, Run: in.runs, CrashCount: in.hist.CrashCount,
		Degraded: in.hist.Degraded, Restarts: in.hist.Restarts, LastExit: in.lastExit,
		NextStartAt: program.Time{Time: in.nextStart},
	}
	snap := program.Snapshot{Spec: in.spec, Backoff: in.backoff, LastOutput: in.lastOutput(), TTY: in.ttyReport()}
	if in.proto != nil {
		snap.Protocol, snap.ProtocolWhy = in.proto.report, in.protocolWhy()
	}
	if r := in.cur; r != nil {
		pid := r.pid
		st.PID, st.StartedAt = &pid, program.Time{Time: r.started}
		switch {
		case r.signalled:
			snap.Stopping = stoppingFor[r.intent]
		case !r.turnWait.IsZero():
			snap.Stopping, snap.TurnWait = stoppingFor[r.intent], r.turnWait
			st.State = program.StateStopping
		}
	}
	in.reportHealth(&st)
	snap.Status, snap.Turn, snap.Members = st, in.turnReport(), in.membersFunc()
	in.deps.Update(snap)
	in.keep()
}

// stoppingFor names why a run is being stopped, for the status's why.
var stoppingFor = map[restart.Intent]string{
	restart.IntentStop: "stop", restart.IntentOperatorRestart: "restart", restart.IntentWedgeRestart: "wedge",
	restart.IntentRSSDrain: "rss", restart.IntentStartTimeout: "start_timeout",
	restart.IntentProtocolCrash: "protocol", restart.IntentProtocolFatal: "protocol",
}
