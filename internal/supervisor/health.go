package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/spawn"
)

// health is an instance's notify socket, readiness and watchdogs. Like the
// rest of the Instance, it belongs to the loop goroutine, except mem (the
// memory sampler's atomics); what the socket and the probes deliver comes
// through the inbox.
type health struct {
	sock    *notify.Socket // the current run's socket; nil when no run (or none could be had)
	checkT  *time.Timer    // the next look at the wedge sources (armCheck); nil when none is due
	startT  *time.Timer    // start_timeout, with ready = "notify"
	probeT  *time.Ticker   // the liveness probe's interval
	probing bool           // a probe is in flight

	statusText string // the last STATUS= of the current run
	turnSet    bool   // X_TEND_TURN seen in this run: it alone decides the agent's turn from now on
	turn       bool

	r   runHealth // reset at every spawn
	mem memState  // shared with the manager's memory watchdog
}

// mergeMessage folds later into m as if both had been applied in order:
// later values win, events (READY=1, a heartbeat, a trigger) are kept,
// and READY=1 and RELOADING=1 cancel each other in the order they came.
func mergeMessage(m, later *notify.Message) {
	if later.Ready {
		m.Ready, m.Reloading = true, false
	}
	if later.Reloading {
		m.Reloading, m.Ready = true, false
	}
	m.Stopping = m.Stopping || later.Stopping
	m.Barrier = m.Barrier || later.Barrier
	m.Watchdog = m.Watchdog || later.Watchdog
	m.WatchdogTrigger = m.WatchdogTrigger || later.WatchdogTrigger
	if later.Status != nil {
		m.Status = later.Status
	}
	if later.WatchdogUSec != nil {
		m.WatchdogUSec = later.WatchdogUSec
	}
	if later.ExtendTimeoutUSec != nil {
		m.ExtendTimeoutUSec = later.ExtendTimeoutUSec
	}
	if later.MainPID != nil {
		m.MainPID = later.MainPID
	}
	if later.Errno != nil {
		m.Errno = later.Errno
	}
	if later.Turn != nil {
		m.Turn = later.Turn
	}
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

// openNotify gives the run about to start its own NOTIFY_SOCKET, or keeps
// the one the run before it retired (retireNotify). The socket lives only
// while a run does, or a restart is due at once: a stopped instance holds
// no descriptor. A
// failure for want of the daemon's resources fails the spawn (the
// daemon_resources rule); any other leaves the run without a socket (and
// says so in its log) rather than without the run.
func (in *Instance) openNotify() error {
	if in.deps.NotifyDir == "" || in.sock != nil {
		return nil
	}
	opts, own := in.notifyOptions()
	sock, err := notify.ListenOptions(in.notifyPath(own), in.putNote, opts)
	if err != nil {
		if restart.DaemonFault(err) {
			return fmt.Errorf("notify socket: %w", err)
		}
		in.out.Note(fmt.Sprintf("no notify socket for %s: %v", in.id, err))
		return nil
	}
	in.sock = sock
	return nil
}

// notifyOptions are the options of the instance's notify socket, and
// whether its run is tend's own user's: a run of another user owns its
// socket and may send to it as itself (the socket drops datagrams of any
// other user but root and tend's).
func (in *Instance) notifyOptions() (opts notify.Options, own bool) {
	opts, own = notify.Options{OnDrop: in.deps.NotifyDrop}, true
	if cred, err := spawn.Credential(in.spec.User, in.spec.Group); err == nil && cred != nil {
		opts.Owner = &notify.Owner{UID: int(cred.Uid), GID: int(cred.Gid)} // the run may send as itself
		own = int(cred.Uid) == os.Geteuid()
	}
	return opts, own
}

// notifyPath is where the instance's socket goes: state_dir/notify/NAME-K.sock,
// or in the short private directory when the run is another user's (it
// cannot enter the state directory) or the path would pass sun_path's limit,
// there named by a digest when even that is too long.
func (in *Instance) notifyPath(own bool) string {
	name := program.InstanceBase(in.spec.Name, in.k) + ".sock"
	if p := filepath.Join(in.deps.NotifyDir, name); own && len(p) <= maxSocketPath || in.deps.ShortDir == "" {
		return p
	}
	if p := filepath.Join(in.deps.ShortDir, name); len(p) <= maxSocketPath {
		return p
	}
	sum := sha256.Sum256([]byte(in.id))
	return filepath.Join(in.deps.ShortDir, hex.EncodeToString(sum[:8])+".sock")
}

// maxSocketPath is the longest socket path sd_notify clients can use:
// sun_path is 108 bytes with room for the NUL.
const maxSocketPath = 107

// retireNotify ends the ended run's hold on its socket: what it sent and
// no one read yet is discarded, and the socket stays open for a restart
// that follows at once (letGoOfRun closes it otherwise): a new one would
// cost a bind and two trips to the epoll loop's thread on the way from the
// exit to the next fork. A socket that cannot be retired is closed.
func (in *Instance) retireNotify() {
	if in.sock != nil && !in.sock.Retire() {
		in.sock.Close()
		in.sock = nil
	}
	in.drop(func(m *mail) { m.note = nil }) // what the ended run said no longer matters
}

// closeNotify closes the run's socket, once the run has ended.
func (in *Instance) closeNotify() {
	if in.sock != nil {
		in.sock.Close()
		in.sock = nil
	}
	in.drop(func(m *mail) { m.note = nil }) // what an ended run said no longer matters
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
	in.closeNotify()
}

// startHealth arms the run's readiness timeout and watchdogs.
func (in *Instance) startHealth(now time.Time) {
	s := in.spec
	// A protocol run is ready once it has a session (protocol.go), and
	// its turns are the protocol's, exactly, from the start.
	in.r = runHealth{heartbeat: now, watchdog: s.Watchdog, ready: s.Ready != program.ReadyNotify && s.Protocol == program.ProtocolNone}
	in.statusText, in.turnSet, in.turn = "", s.Protocol != program.ProtocolNone, false // a new run starts between turns
	if !in.r.ready {
		in.state = program.StateStarting
		in.r.startBy = now.Add(s.StartTimeout)
		in.startT = time.NewTimer(s.StartTimeout)
	}
	if s.Watchdog > 0 || s.IdleOutputTimeout > 0 || s.Probe != nil {
		in.armCheck(now)
	}
	if in.cur != nil {
		in.mem.peak.Store(0) // a run shorter than a sample must not report the last one's peak
		in.mem.pid.Store(int64(in.cur.pid))
	}
	if s.Probe != nil {
		in.probeT = time.NewTicker(s.Probe.Interval)
	}
}

// stopHealth disarms everything; a probe in flight reports to nobody.
func (in *Instance) stopHealth() {
	in.mem.pid.Store(0)
	in.stopCheck()
	if in.startT != nil {
		in.startT.Stop()
		in.startT = nil
	}
	if in.probeT != nil {
		in.probeT.Stop()
		in.probeT = nil
	}
}

func (in *Instance) stopCheck() {
	if in.checkT != nil {
		in.checkT.Stop()
		in.checkT = nil
	}
}

func (in *Instance) checkC() <-chan time.Time {
	if in.checkT == nil {
		return nil
	}
	return in.checkT.C
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
	now := time.Now()
	if m.Status != nil {
		in.statusText = *m.Status
	}
	if m.Turn != nil {
		in.turnSet, in.turn = true, *m.Turn
		if !r.turnWait.IsZero() {
			in.checkTurnWait()
		}
	}
	if m.WatchdogUSec != nil {
		in.r.watchdog = time.Duration(*m.WatchdogUSec) * time.Microsecond
		in.r.heartbeat = now
		in.armCheck(now) // armed (maybe by a program without `watchdog`), changed or taken away
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
		in.endWith(restart.IntentStartTimeout, in.spec.StopSignal, in.spec.StopGrace)
	}
}

// onOverMem drains the run the memory watchdog found past max_rss.
func (in *Instance) onOverMem(o memOver) {
	if r := in.cur; r == nil || r.signalled || r.pid != o.pid {
		return // a sample of a run that has ended or is already stopping
	}
	in.publish(program.KindRSSExceeded, &program.RSSExceeded{RSSBytes: o.rss, MaxRSS: in.spec.MaxRSS})
	in.endWith(restart.IntentRSSDrain, in.spec.StopSignal, in.spec.StopGrace) // memory never waits for a turn
}

// checkHealth looks at whether the run is wedged, then sets the next look.
func (in *Instance) checkHealth() {
	r := in.cur
	if r == nil || r.signalled {
		in.checkT = nil // spent: nothing to watch
		return
	}
	now := time.Now()
	in.observeWedge(now)
	if !r.signalled { // a wedge restart stopped the checks
		in.armCheck(now)
	}
}

// observeWedge counts one observation of the run: wedge_checks of them
// in a row, one check apart, and the run is wedged.
func (in *Instance) observeWedge(now time.Time) {
	if in.state != program.StateRunning || now.Sub(in.cur.started) < in.spec.WedgeStartupGrace {
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

// checkEvery is the cadence of the wedge checks: of the idle output and
// probe sources, and of the observations wedge_checks counts.
const checkEvery = time.Second

// armCheck sets the next look at the wedge sources: checkEvery from now,
// or sooner, the moment the watchdog's deadline passes (a 2 s watchdog
// fires at 2 s, not at the next whole second), or only then when the
// watchdog is all there is to watch. Once an observation found the run
// wedged, the next ones (wedge_checks) come checkEvery apart.
func (in *Instance) armCheck(now time.Time) {
	s, d := in.spec, checkEvery
	if in.r.watchdog <= 0 && s.IdleOutputTimeout <= 0 && s.Probe == nil {
		in.stopCheck() // a WATCHDOG_USEC=0 took the last source away
		return
	}
	if w := in.r.watchdog; w > 0 && in.r.streak == 0 {
		// observe wants more than w of silence, and nothing counts before
		// the startup grace ends.
		due := max(in.r.heartbeat.Add(w+time.Millisecond).Sub(now), in.cur.started.Add(s.WedgeStartupGrace).Sub(now))
		if due > 0 && (due < d || s.IdleOutputTimeout <= 0 && s.Probe == nil) {
			d = due
		}
	}
	if in.checkT == nil {
		in.checkT = time.NewTimer(d)
		return
	}
	in.checkT.Reset(d) // since Go 1.23 Reset also drops a stale expiry
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
		in.putProbe(probeResult{run: n, err: err})
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
