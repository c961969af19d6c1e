package supervisor

import (
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
)

// health is an instance's notify socket, readiness and watchdogs. Like the
// rest of the Instance, it belongs to the loop goroutine; only notes and
// probeDone are written from elsewhere.
type health struct {
	notes     chan *notify.Message // from the socket's reader; a full channel drops (pointers: 8 idle slots cost 64 bytes)
	sock      *notify.Socket       // nil when the instance has none
	ticker    *time.Ticker         // the 1 s checks while a run is in place
	startT    *time.Timer          // start_timeout, with ready = "notify"
	probeT    *time.Ticker         // the liveness probe's interval
	probeDone chan probeResult     // results of the probe in flight
	probing   bool                 // a probe is in flight

	statusText string // the last STATUS= of the current run
	turnSet    bool   // X_TEND_TURN seen: it alone decides the agent's turn from now on
	turn       bool

	r   runHealth // reset at every spawn
	mem memState  // shared with the manager's memory watchdog
}

// runHealth is what the watchdogs know about the current run.
type runHealth struct {
	ready, reloading, stopping bool      // READY=1, RELOADING=1, STOPPING=1
	heartbeat                  time.Time // the last WATCHDOG=1 (the spawn to begin with)
	watchdog                   time.Duration
	startBy                    time.Time
	streak                     int // consecutive wedged observations
	probeFails                 int
	probeErr                   string
	wedge                      *program.Wedge
	warned                     bool // wedge_restart_loop announced for this run
}

type probeResult struct {
	run int
	err error
}

// openNotify gives the instance its own NOTIFY_SOCKET. A failure leaves it
// without one (and says so in its log) rather than without the instance.
func (in *Instance) openNotify() {
	// Only what the spec uses: each channel the loop selects on holds a
	// waiter record while the loop sleeps, a thousand of them for nothing.
	if in.spec.MaxRSS > 0 {
		in.mem.over = make(chan memOver, 1)
	}
	if in.spec.Probe != nil {
		in.probeDone = make(chan probeResult, 1)
	}
	if in.deps.NotifyDir == "" {
		return
	}
	path := filepath.Join(in.deps.NotifyDir, in.spec.Name+"-"+strconv.Itoa(in.k)+".sock")
	var opts notify.Options
	if cred, err := spawn.Credential(in.spec.User, in.spec.Group); err == nil && cred != nil {
		opts.Owner = &notify.Owner{UID: int(cred.Uid), GID: int(cred.Gid)} // the run may send as itself
	}
	in.notes = make(chan *notify.Message, 8)
	sock, err := notify.ListenOptions(path, func(m notify.Message) {
		select {
		case in.notes <- &m:
		default:
			if in.deps.Dropped != nil {
				in.deps.Dropped()
			}
		}
	}, opts)
	if err != nil {
		in.out.Note(fmt.Sprintf("no notify socket for %s: %v", in.id, err))
		return
	}
	in.sock = sock
}

// runEnv is the environment of a run (and of a probe): built when needed
// rather than kept, since a thousand idle copies of tend's environment
// would be most of the daemon's memory.
func (in *Instance) runEnv() []string {
	addr := ""
	if in.sock != nil {
		addr = in.sock.Addr()
	}
	return spawn.Env(in.spec, in.k, addr)
}

func (in *Instance) closeHealth() {
	in.stopHealth()
	if in.sock != nil {
		in.sock.Close()
	}
}

// startHealth arms the run's readiness timeout and watchdogs.
func (in *Instance) startHealth(now time.Time) {
	s := in.spec
	in.r = runHealth{heartbeat: now, watchdog: s.Watchdog, ready: s.Ready != program.ReadyNotify}
	in.statusText = ""
	if !in.r.ready {
		in.state = program.StateStarting
		in.r.startBy = now.Add(s.StartTimeout)
		in.startT = time.NewTimer(s.StartTimeout)
	}
	if s.Watchdog > 0 || s.IdleOutputTimeout > 0 || s.Probe != nil {
		in.ticker = time.NewTicker(time.Second)
	}
	if in.cur != nil {
		in.mem.pid.Store(int64(in.cur.pid))
	}
	if s.Probe != nil {
		in.probeT = time.NewTicker(s.Probe.Interval)
	}
}

// stopHealth disarms everything; a probe in flight reports to nobody.
func (in *Instance) stopHealth() {
	in.mem.pid.Store(0)
	if in.ticker != nil {
		in.ticker.Stop()
		in.ticker = nil
	}
	if in.startT != nil {
		in.startT.Stop()
		in.startT = nil
	}
	if in.probeT != nil {
		in.probeT.Stop()
		in.probeT = nil
	}
}

func (in *Instance) tickC() <-chan time.Time {
	if in.ticker == nil {
		return nil
	}
	return in.ticker.C
}

func (in *Instance) startC() <-chan time.Time {
	if in.startT == nil {
		return nil
	}
	return in.startT.C
}

func (in *Instance) probeC() <-chan time.Time {
	if in.probeT == nil {
		return nil
	}
	return in.probeT.C
}

// onNotify applies one message from the run's notify socket. A message
// belongs to this instance because it came to this instance's socket.
func (in *Instance) onNotify(m notify.Message) {
	r := in.cur
	if r == nil || r.signalled {
		return
	}
	now := in.now()
	if m.Status != nil {
		in.statusText = *m.Status
	}
	if m.Turn != nil {
		in.turnSet, in.turn = true, *m.Turn
	}
	if m.WatchdogUSec != nil {
		in.r.watchdog = time.Duration(*m.WatchdogUSec) * time.Microsecond
		in.r.heartbeat = now
	}
	if m.Watchdog {
		in.r.heartbeat = now
	}
	if m.ExtendTimeoutUSec != nil && in.startT != nil {
		d := time.Duration(*m.ExtendTimeoutUSec) * time.Microsecond
		if by := now.Add(d); by.After(in.r.startBy) {
			in.r.startBy = by
			in.startT.Reset(d)
		}
	}
	if m.Reloading {
		in.r.reloading, in.r.ready = true, false
	}
	if m.Stopping {
		in.r.stopping = true
	}
	if m.Ready {
		in.r.ready, in.r.reloading = true, false
		if in.state == program.StateStarting {
			in.state = program.StateRunning
			if in.startT != nil {
				in.startT.Stop()
				in.startT = nil
			}
		}
	}
	if m.WatchdogTrigger {
		in.wedged(now, "watchdog", "the run sent WATCHDOG=trigger")
	}
}

func (in *Instance) onStartTimeout() {
	in.startT = nil
	if in.cur != nil && !in.cur.signalled && in.state == program.StateStarting {
		in.end(restart.IntentStartTimeout)
	}
}

// onOverMem drains the run the memory watchdog found past max_rss.
func (in *Instance) onOverMem(o memOver) {
	if r := in.cur; r == nil || r.signalled || r.pid != o.pid {
		return // a sample of a run that has ended or is already stopping
	}
	in.publish(program.KindRSSExceeded, &program.RSSExceeded{RSSBytes: o.rss, MaxRSS: in.spec.MaxRSS})
	in.end(restart.IntentRSSDrain)
}

// checkHealth is the once-a-second look at whether a run is wedged.
func (in *Instance) checkHealth() {
	r := in.cur
	if r == nil || r.signalled {
		return
	}
	now := in.now()
	if in.state != program.StateRunning || now.Sub(r.started) < in.spec.WedgeStartupGrace {
		in.r.streak = 0
		return
	}
	source, detail := in.observe(now)
	if source == "" {
		in.r.streak = 0
		return
	}
	if in.r.streak++; in.r.streak >= in.spec.WedgeChecks {
		in.wedged(now, source, detail)
	}
}

// observe asks each wedge source whether the run is making progress.
func (in *Instance) observe(now time.Time) (source, detail string) {
	s, r := in.spec, in.cur
	if w := in.r.watchdog; w > 0 && now.Sub(in.r.heartbeat) > w {
		return "watchdog", fmt.Sprintf("no WATCHDOG=1 for %s (watchdog %s)", roundSecond(now.Sub(in.r.heartbeat)), w)
	}
	if t := s.IdleOutputTimeout; t > 0 {
		last := in.out.LastActivity()
		if last.Before(r.started) {
			last = r.started
		}
		if now.Sub(last) > t {
			return "idle_output", fmt.Sprintf("no output for %s (idle_output_timeout %s)", roundSecond(now.Sub(last)), t)
		}
	}
	if p := s.Probe; p != nil && in.r.probeFails >= p.FailureThreshold {
		return "probe", fmt.Sprintf("probe failed %d times in a row: %s", in.r.probeFails, in.r.probeErr)
	}
	return "", ""
}

// wedged restarts the run as an intentional restart (SIGTERM, then SIGKILL
// after wedge_restart_grace, to this run only), unless more than
// wedge_loop_budget wedge restarts would fall in the window: then it warns
// once and leaves the run running until the window has room.
func (in *Instance) wedged(now time.Time, source, detail string) {
	if in.cur == nil || in.cur.signalled || now.Sub(in.cur.started) < in.spec.WedgeStartupGrace {
		return
	}
	s := in.spec
	w := &program.Wedge{Source: source, Detail: detail, At: program.Time{Time: now}}
	in.r.wedge = w
	if n := in.hist.WedgeRestarts(s.WedgeLoopWindow, now); n >= s.WedgeLoopBudget {
		w.PausedUntil = program.Time{Time: in.hist.WedgePauseEnds(s.WedgeLoopWindow, now)}
		if !in.r.warned {
			in.r.warned = true
			in.publish(program.KindWedged, &program.Wedged{Source: source, Detail: detail})
			in.publish(program.KindHealthWarn, &program.HealthWarn{Reason: program.WarnWedgeRestartLoop, Count: n + 1, WindowMS: s.WedgeLoopWindow.Milliseconds()})
		}
		return
	}
	in.publish(program.KindWedged, &program.Wedged{Source: source, Detail: detail})
	in.endWith(restart.IntentWedgeRestart, syscall.SIGTERM, s.WedgeRestartGrace)
}

// startProbe runs the liveness probe once, off the loop goroutine.
func (in *Instance) startProbe() {
	r := in.cur
	if r == nil || r.signalled || in.probing || in.state != program.StateRunning {
		return
	}
	in.probing = true
	p, n, cwd, env := in.spec.Probe, r.n, in.spec.Cwd, in.runEnv()
	go func() {
		var err error
		if len(p.Exec) > 0 {
			var cred *syscall.Credential
			if cred, err = spawn.Credential(in.spec.User, in.spec.Group); err == nil {
				err = spawn.Probe(in.deps.Reaper, p.Exec, cwd, env, cred, p.Timeout)
			}
		} else {
			err = spawn.ProbeHTTP(p.HTTP, p.Timeout)
		}
		select {
		case in.probeDone <- probeResult{run: n, err: err}:
		case <-in.done:
		}
	}()
}

func (in *Instance) onProbe(res probeResult) {
	in.probing = false
	if in.cur == nil || in.cur.n != res.run {
		return // a probe of a run that has ended since
	}
	if res.err == nil {
		in.r.probeFails, in.r.probeErr = 0, ""
		return
	}
	in.r.probeFails++
	in.r.probeErr = res.err.Error()
}

// reportHealth adds readiness, notify and watchdog findings to a status.
func (in *Instance) reportHealth(st *program.Status) {
	st.MaxRSS = in.spec.MaxRSS
	if in.cur == nil {
		return
	}
	st.StatusText = in.statusText
	st.Ready = in.r.ready && (in.state == program.StateRunning || in.state == program.StateStopping)
	if in.mem.pid.Load() == int64(in.cur.pid) {
		st.PeakRSS = in.mem.peak.Load()
	}
	st.Wedge = in.r.wedge
	if in.state == program.StateRunning {
		switch {
		case in.r.stopping:
			st.State = program.StateStopping // the run said STOPPING=1
		case in.r.reloading:
			st.State = program.StateStarting // RELOADING=1 until the next READY=1
		}
	}
}

// turn is the agent's X_TEND_TURN, once it has sent one.
func (in *Instance) turnReport() *bool {
	if !in.turnSet || in.cur == nil {
		return nil
	}
	t := in.turn
	return &t
}

func roundSecond(d time.Duration) time.Duration { return d.Round(time.Second) }
