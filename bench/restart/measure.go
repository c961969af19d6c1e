package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/broker"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/supervisor"
)

// eventWait bounds every wait for an event; only a broken mechanism needs it.
const eventWait = 10 * time.Second

// baselineResult is the bare cost of process creation on this machine.
type baselineResult struct {
	spawns  int
	elapsed time.Duration
}

func (b baselineResult) rate() float64 { return float64(b.spawns) / b.elapsed.Seconds() }

// measureBaseline runs fork+exec+wait of /bin/true in a loop for d. It must
// run before the reaper starts (it waits for its own children).
func measureBaseline(ctx context.Context, d time.Duration) (baselineResult, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return baselineResult{}, err
	}
	defer null.Close()
	argv := []string{"/bin/true"}
	// The same stdio shape and environment a run gets from spawn, minus its pipe.
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	once := func() error {
		pid, err := syscall.ForkExec(argv[0], argv, attr)
		if err != nil {
			return err
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				return err
			}
		}
	}
	for range 20 { // warm-up: page cache, Go runtime
		if err := once(); err != nil {
			return baselineResult{}, err
		}
	}
	var res baselineResult
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if err := once(); err != nil {
			return res, err
		}
		res.spawns++
	}
	res.elapsed = time.Since(start)
	return res, ctx.Err()
}

// stamped is an event as published, with the time Publish returned.
type stamped struct {
	e  program.Event
	at time.Time
}

// rig is what the daemon builds around its supervisors: one reaper for the
// process (subreaper on), the audit log and the broker. Each phase runs its
// own Manager on it.
type rig struct {
	dir     string
	capture *spawn.Capture // the runs' output, in dir/logs
	log     *events.Log
	reaper  *reaper.Reaper
	broker  *broker.Broker
	hook    atomic.Pointer[func(stamped)] // the current phase's observer, or nil
}

// openRig opens the audit log in dir/audit and starts the reaper. Only one
// rig may exist per process: the reaper owns wait4 for all of it.
func openRig(dir string) (*rig, error) {
	logs, err := statedir.Open(filepath.Join(dir, "logs"))
	if err != nil {
		return nil, err
	}
	log, err := events.Open(events.Options{Dir: filepath.Join(dir, "audit")})
	if err != nil {
		return nil, err
	}
	r := &rig{dir: dir, capture: spawn.NewCapture(spawn.CaptureOptions{Logs: logs}), log: log, reaper: reaper.New()}
	if err := r.reaper.Start(true); err != nil {
		log.Close()
		return nil, err
	}
	r.broker = broker.New(r.publish, nil, nil)
	return r, nil
}

// publish is the daemon's publish function with a timestamp taken once the
// event is numbered, appended to the audit file and fanned out.
func (r *rig) publish(e program.Event) {
	e = r.log.Publish(e)
	at := time.Now()
	if h := r.hook.Load(); h != nil {
		(*h)(stamped{e: e, at: at})
	}
}

// observe makes f see every event published from now on (nil: none).
func (r *rig) observe(f func(stamped)) {
	if f == nil {
		r.hook.Store(nil)
		return
	}
	r.hook.Store(&f)
}

func (r *rig) manager() *supervisor.Manager {
	return supervisor.NewManager(supervisor.Deps{
		Reaper: r.reaper, Publish: r.publish, Update: r.broker.Update,
		Rand: rand.Float64, Capture: r.capture,
	}, r.broker.Forget)
}

// shutdown stops every instance of m, whether or not the phase was cut short.
func shutdown(m *supervisor.Manager) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Shutdown(ctx)
}

// close kills and reaps any child still left, stops the reaper and closes
// the audit log.
func (r *rig) close() error {
	r.observe(nil)
	var err error
	if left := killChildren(r.reaper); len(left) > 0 {
		err = fmt.Errorf("children left after cleanup: %v", left)
	}
	r.reaper.Stop()
	r.capture.Close()
	if n := r.log.WriteErrors(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d audit write errors: %v", n, r.log.Err()))
	}
	return errors.Join(err, r.log.Close())
}

// benchSpec is a program as a config would give it (every key at its SPEC
// default or set), restarting at once after every end.
func benchSpec(name string, argv ...string) program.Spec {
	return program.Spec{
		Name: name, Command: argv, Cwd: os.TempDir(), Instances: 1, Restart: program.RestartAlways,
		Autostart: true, Ready: program.ReadySpawn, StartTimeout: 30 * time.Second,
		StopSignal: syscall.SIGTERM, StopGrace: 10 * time.Second,
		BackoffInitial: 0, BackoffMax: 0, BackoffJitter: 0.1,
		CleanExitCodes: []int{0}, FatalExitCodes: []int{}, StableRunReset: 5 * time.Minute,
		MaxCrashes: 1 << 30, HardMaxCrashes: 0,
		CleanRestartBudget: 10, CleanRestartWindow: time.Minute, CleanRestartBackoff: time.Second,
		RSSExitCode: 12, RSSBackoff: 30 * time.Second, RSSLoopBudget: 3, RSSLoopWindow: 10 * time.Minute,
		WedgeChecks: 1, WedgeRestartGrace: 10 * time.Second, WedgeLoopBudget: 3, WedgeLoopWindow: 30 * time.Minute,
		TurnIdleAfter: 10 * time.Second,
		Logs:          program.Logs{MaxSize: 50 << 20, MaxFiles: 5},
	}
}

// crashResult is one crash-loop window.
type crashResult struct {
	restarts int64         // spawned events in the window
	events   uint64        // events published in the window (audit lines)
	elapsed  time.Duration // wall time of the window
	cpu      time.Duration // this process's user+sys CPU in the window
	failed   int64         // spawn_failed events, whole phase
	others   float64       // CPUs kept busy by other processes in the window
}

func (c crashResult) rate() float64 { return float64(c.restarts) / c.elapsed.Seconds() }

// cpuPerRestart is the daemon's CPU per restart; children are not counted.
func (c crashResult) cpuPerRestart() time.Duration {
	if c.restarts == 0 {
		return 0
	}
	return c.cpu / time.Duration(c.restarts)
}

// crashLoop supervises /bin/false with zero backoff and counts the restarts
// in a window that opens after warmup.
func (r *rig) crashLoop(ctx context.Context, warmup, window time.Duration) (res crashResult, err error) {
	var spawned, failed atomic.Int64
	r.observe(func(s stamped) {
		switch s.e.Kind {
		case program.KindSpawned:
			spawned.Add(1)
		case program.KindSpawnFailed:
			failed.Add(1)
		}
	})
	defer r.observe(nil)
	m := r.manager()
	defer func() { err = errors.Join(err, shutdown(m)) }()
	if _, err := m.Add(benchSpec("crashloop", "/bin/false")); err != nil {
		return res, err
	}
	if err := measure.Sleep(ctx, warmup); err != nil {
		return res, err
	}
	n0, ev0, cpu0, t0, u0 := spawned.Load(), r.log.Published(), cpuTime(), time.Now(), sample()
	if err := measure.Sleep(ctx, window); err != nil {
		return res, err
	}
	n1, ev1, cpu1, t1 := spawned.Load(), r.log.Published(), cpuTime(), time.Now()
	res = crashResult{restarts: n1 - n0, events: ev1 - ev0, elapsed: t1.Sub(t0), cpu: cpu1 - cpu0, failed: failed.Load(), others: u0.othersSince()}
	if res.failed > 0 {
		return res, fmt.Errorf("%d spawns failed", res.failed)
	}
	if res.restarts == 0 {
		return res, errors.New("no restart in the window")
	}
	return res, nil
}

// cpuTime is this process's user+sys CPU time (RUSAGE_SELF: not its children).
func cpuTime() time.Duration { return rusage(syscall.RUSAGE_SELF) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// usage is a point in time for measuring how busy the rest of the machine
// was: on a shared VM a slow window is often someone else's load.
type usage struct {
	at   time.Time
	ours time.Duration // this process and its reaped children
	busy time.Duration // every CPU's non-idle time, steal included
}

func sample() usage {
	return usage{at: time.Now(), ours: rusage(syscall.RUSAGE_SELF) + rusage(syscall.RUSAGE_CHILDREN), busy: measure.MachineBusy()}
}

// othersSince is how many CPUs other processes (and the hypervisor, as
// steal) kept busy on average since u; -1 if /proc/stat is unreadable.
func (u usage) othersSince() float64 {
	now := sample()
	if u.busy < 0 || now.busy < 0 {
		return -1
	}
	others := (now.busy - u.busy) - (now.ours - u.ours)
	return max(float64(others)/float64(now.at.Sub(u.at)), 0)
}

// killChildren SIGKILLs and reaps every child of this process still alive
// (none, when every Manager has shut down) and returns those it could not
// get rid of.
func killChildren(r *reaper.Reaper) []int {
	kids := measure.Children()
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 250 && len(kids) > 0; i++ {
		r.Drain()
		if kids = measure.Children(); len(kids) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return kids
}
