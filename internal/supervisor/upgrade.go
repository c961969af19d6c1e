package supervisor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
)

// An upgrade in place (tend upgrade) re-executes the daemon in the same
// process. Each instance is first frozen (Manager.Freeze): its loop stops
// between two steps, so nothing is half done, no spawn starts and no
// signal is sent; its notify socket is no longer read (datagrams wait in
// its queue) and its output is written out and no longer read (bytes wait
// in the pipe); what was already delivered to its inbox is handled first.
// It then hands over what the intent record does not hold: its run as it
// is (a child of this process, which stays its parent across the exec),
// the watchdogs' view of it, and the descriptors its run's notify socket
// and output pipes are read from, by name. The new daemon's instance
// takes all that up where it is made (takeOver), instead of adopting the
// run; if the exec fails, thaw lets every instance go on as if nothing
// happened.

// Live is an instance's part of the handover.
type Live struct {
	State    string    `json:"state"`
	Runs     int       `json:"runs"`
	Attempts int       `json:"attempts"`
	SpawnDue bool      `json:"spawn_due,omitempty"`
	WakeAt   time.Time `json:"wake_at,omitzero"` // when the wake timer (backoff, stop grace, turn wait) fires
	Run      *LiveRun  `json:"run,omitempty"`
	Output   spawn.Carried
	Notify   string `json:"notify,omitempty"` // the notify socket's path; its descriptor is handed over as notifyName
}

// LiveRun is the run in place, with its health as the watchdogs saw it.
type LiveRun struct {
	PID        int            `json:"pid"`
	N          int            `json:"n"`
	Attempt    int            `json:"attempt"`
	Started    time.Time      `json:"started"`
	Intent     restart.Intent `json:"intent,omitempty"`
	Signalled  bool           `json:"signalled,omitempty"`
	TurnWait   time.Time      `json:"turn_wait,omitzero"`
	Reaped     *reaper.Status `json:"reaped,omitempty"` // its leader was collected; its group is draining
	Adopted    bool           `json:"adopted,omitempty"`
	StartTicks uint64         `json:"start_ticks,omitempty"` // an adopted run's, to adopt it again

	Ready, Reloading, Stopping bool
	Heartbeat                  time.Time
	Watchdog                   time.Duration
	StartBy                    time.Time
	Streak, ProbeFails         int
	ProbeErr                   string
	Wedge                      *program.Wedge
	Warned                     bool
	StatusText                 string
	TurnSet, Turn              bool
	Peak                       int64
}

// Names of an instance's descriptors in the handover.
func notifyName(id string) string        { return "notify/" + id }
func outputName(id string, i int) string { return "output/" + id + "/" + strconv.Itoa(i) }

// freezeReq asks an instance to freeze: it replies once, then waits for
// thaw (closed when the upgrade did not happen; after a successful exec
// nothing waits any more).
type freezeReq struct {
	reply chan frozen
	thaw  chan struct{}
}

// frozen is one instance's reply: its part and its descriptors by name.
type frozen struct {
	id   string
	live Live
	fds  map[string]int
	err  error
}

// putFreeze asks the instance to freeze.
func (in *Instance) putFreeze(r *freezeReq) bool {
	return in.put(func(m *mail) { m.freeze = r })
}

// beginFreeze stops what brings the instance news on its own (its notify
// socket); the loop then handles what came before, and holds (holdFrozen)
// once nothing is pending.
func (in *Instance) beginFreeze(r *freezeReq) {
	in.freezing = r
	if in.sock != nil {
		_ = in.sock.Pause()
	}
}

// holdFrozen hands over the instance's part and waits for thaw.
func (in *Instance) holdFrozen() {
	r := in.freezing
	f := frozen{id: in.id, fds: map[string]int{}}
	f.live, f.err = in.live(f.fds)
	r.reply <- f
	<-r.thaw // forever, once the exec succeeded
	in.freezing = nil
	if in.sock != nil {
		_ = in.sock.Resume()
	}
	in.out.Thaw()
	if in.proto != nil && in.cur != nil {
		in.attachProtocol() // the upgrade did not happen: speak to the agent again
	}
	in.report()
}

// live is the instance's part of the handover; its descriptors go in fds.
func (in *Instance) live(fds map[string]int) (Live, error) {
	l := Live{State: in.state, Runs: in.runs, Attempts: in.attempts, SpawnDue: in.spawnDue}
	if in.wakeArmed {
		l.WakeAt = in.wakeAt
	}
	in.closeProtocol() // the next daemon opens the agent's FIFOs again (protocol.go)
	out, err := in.out.Freeze()
	for i, s := range out.Streams {
		fds[outputName(in.id, i)] = s.FD
	}
	in.liveTTY(fds) // paused by Freeze: what the run writes now waits in its terminal
	l.Output = out
	r := in.cur
	if r == nil {
		return l, err
	}
	lr := &LiveRun{
		PID: r.pid, N: r.n, Attempt: r.attempt, Started: r.started, Intent: r.intent,
		Signalled: r.signalled, TurnWait: r.turnWait, Reaped: r.reaped, Adopted: r.adopted,
		Ready: in.r.ready, Reloading: in.r.reloading, Stopping: in.r.stopping,
		Heartbeat: in.r.heartbeat, Watchdog: in.r.watchdog, StartBy: in.r.startBy,
		Streak: in.r.streak, ProbeFails: in.r.probeFails, ProbeErr: in.r.probeErr,
		Wedge: in.r.wedge, Warned: in.r.warned, StatusText: in.statusText,
		TurnSet: in.turnSet, Turn: in.turn, Peak: in.mem.peak.Load(),
	}
	if r.adopted {
		lr.StartTicks, _ = reaper.StartTicks(r.pid)
	}
	l.Run = lr
	if in.sock != nil {
		fd, derr := in.sock.Dup()
		if derr == nil {
			fds[notifyName(in.id)] = fd
			l.Notify = in.sock.Addr()
		} else if err == nil {
			err = derr
		}
	}
	return l, err
}

// Freeze freezes every instance and returns their parts by id and their
// descriptors by name. thaw lets them go on (the upgrade did not happen);
// Freeze thaws them itself when ctx ends before every one has answered.
// Nothing may add or remove programs meanwhile (the daemon holds its
// reload lock).
func (m *Manager) Freeze(ctx context.Context) (lives map[string]Live, fds map[string]int, thaw func(), err error) {
	m.mu.Lock()
	var insts []*Instance
	for _, g := range m.progs {
		insts = append(insts, g.insts...)
	}
	m.mu.Unlock()
	req := &freezeReq{reply: make(chan frozen, len(insts)), thaw: make(chan struct{})}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			close(req.thaw)
		}
	}
	n := 0
	for _, in := range insts {
		if in.putFreeze(req) {
			n++
		}
	}
	lives, fds = make(map[string]Live, n), map[string]int{}
	var errs []error
	for range n {
		select {
		case f := <-req.reply:
			lives[f.id] = f.live
			for name, fd := range f.fds {
				fds[name] = fd
			}
			if f.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.id, f.err))
			}
		case <-ctx.Done():
			thaw()
			return nil, fds, thaw, fmt.Errorf("%d of %d instances did not stop for the upgrade in time", n-len(lives), n)
		}
	}
	if len(errs) > 0 {
		return lives, fds, thaw, errs[0]
	}
	return lives, fds, thaw, nil
}

// Carried is what the program this process was before it re-executed
// itself handed over: each instance's part by id, and the descriptors by
// name (Take gives each to one taker).
type Carried struct {
	Lives map[string]Live
	Take  func(name string) (fd int, ok bool)
}

// SetCarried hands the manager what an upgrade handed over: an instance
// made for one of those ids takes it over (takeOver) instead of adopting
// its run or starting.
func (m *Manager) SetCarried(c Carried) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.carried = c
}

// claimLiveLocked takes the part handed over for id, if any.
func (m *Manager) claimLiveLocked(id string) (Live, bool) {
	l, ok := m.carried.Lives[id]
	if ok {
		delete(m.carried.Lives, id)
	}
	return l, ok
}

// Carried is how many runs instances took over from the program this
// process was (after an upgrade).
func (m *Manager) CarriedRuns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.carriedRuns
}

// takeOver takes up the instance's part an upgrade handed over (after
// restore has taken up its intent record): its state and timers, its run
// (registered with the reaper as the child it still is, or adopted again
// through a pidfd if it was adopted), its notify socket and its output.
// What the run's leader did during the exec is held by the reaper until
// this claim.
func (in *Instance) takeOver(l Live, take func(string) (int, bool)) (hasRun bool) {
	in.state, in.spawnDue = l.State, l.SpawnDue
	in.runs, in.attempts = max(in.runs, l.Runs), max(in.attempts, l.Attempts)
	if err := in.out.Adopt(in.carriedOutput(l.Output, take)); err != nil {
		in.out.Note("after the upgrade, cannot read the run's output: " + err.Error())
	}
	if r := l.Run; r != nil {
		hasRun = in.takeRun(r, l.Notify, take)
		if hasRun {
			in.takeOverTTY(r, take)
		}
	}
	if !l.WakeAt.IsZero() {
		in.arm(max(time.Until(l.WakeAt), 0))
	}
	in.record()
	return hasRun
}

// carriedOutput is c with its descriptors taken from the handover.
func (in *Instance) carriedOutput(c spawn.Carried, take func(string) (int, bool)) spawn.Carried {
	var streams []spawn.CarriedStream
	for i, s := range c.Streams {
		if fd, ok := take(outputName(in.id, i)); ok {
			s.FD = fd
			streams = append(streams, s)
		}
	}
	c.Streams = streams
	return c
}

// takeRun puts the run handed over in place; false if it cannot be held
// (an adopted run that ended during the exec: its end is handled as any
// adopted run's, with the status unknown).
func (in *Instance) takeRun(r *LiveRun, sockPath string, take func(string) (int, bool)) bool {
	in.cur = &run{
		pid: r.PID, n: r.N, attempt: r.Attempt, started: r.Started, intent: r.Intent,
		signalled: r.Signalled, turnWait: r.TurnWait, reaped: r.Reaped, adopted: r.Adopted,
	}
	if fd, ok := take(notifyName(in.id)); ok {
		opts, _ := in.notifyOptions()
		sock, err := notify.ListenFD(fd, sockPath, in.putNote, opts)
		if err != nil {
			in.out.Note("after the upgrade, no notify socket for the run: " + err.Error())
		} else {
			in.sock = sock
		}
	}
	in.r = runHealth{
		ready: r.Ready, reloading: r.Reloading, stopping: r.Stopping, heartbeat: r.Heartbeat,
		watchdog: r.Watchdog, startBy: r.StartBy, streak: r.Streak, probeFails: r.ProbeFails,
		probeErr: r.ProbeErr, wedge: r.Wedge, warned: r.Warned,
	}
	in.statusText, in.turnSet, in.turn = r.StatusText, r.TurnSet, r.Turn
	if r.Reaped != nil {
		// Its leader's status was collected before the exec; the rest of
		// its group was being waited for: again.
		if in.drain(*r.Reaped) {
			in.finish(*r.Reaped)
		}
		return in.cur != nil
	}
	if r.Adopted {
		if err := in.deps.Reaper.Adopt(r.PID, r.StartTicks, in.putExit); err != nil {
			in.finish(reaper.Status{PID: r.PID, Adopted: true, At: time.Now()})
			return false
		}
	} else if !in.deps.Reaper.Claim(r.PID, in.putExit) {
		in.finish(reaper.Status{PID: r.PID, Adopted: true, At: time.Now()}) // cannot happen: every run handed over is expected
		return false
	}
	in.mem.peak.Store(r.Peak)
	in.resumeHealth(time.Now())
	return true
}

// resumeHealth arms the run's watchdogs as they stood before the upgrade.
func (in *Instance) resumeHealth(now time.Time) {
	s, r := in.spec, in.cur
	if r.signalled {
		return // stopping: no watchdog looks at it
	}
	if !in.r.ready && in.state == program.StateStarting {
		in.startT = time.NewTimer(max(in.r.startBy.Sub(now), 0))
	}
	if in.r.watchdog > 0 || s.IdleOutputTimeout > 0 || s.Probe != nil {
		in.armCheck(now)
	}
	in.mem.pid.Store(int64(r.pid))
	if s.Probe != nil {
		in.probeT = time.NewTicker(s.Probe.Interval)
	}
	// A turn wait's next look is the wake timer's (Live.WakeAt).
}
