package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/supervisor"
)

// measureBaseline runs fork+exec+wait of /bin/true in a loop for d. It must
// run before the reaper starts (it waits for its own children).
func measureBaseline(ctx context.Context, d time.Duration) (Baseline, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return Baseline{}, err
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
			return Baseline{}, err
		}
	}
	var res Baseline
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if err := once(); err != nil {
			return res, err
		}
		res.Spawns++
	}
	res.Elapsed = measure.NewMs(time.Since(start))
	return res, ctx.Err()
}

// benchConfig is the config the programs come from, parsed by tend's own
// config package so that every key a phase does not set is at the default
// a user gets: "zero" and "crashloop" minimise every restart delay (as
// bench/peers does for every tool), "default" sets nothing.
func benchConfig(sleep string) string {
	return fmt.Sprintf(`[daemon]
state_dir = "state"

[program.crashloop]
command = ["/bin/false"]
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000000

[program.zero]
command = [%[1]q, "100000"]
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000000

[program.default]
command = [%[1]q, "100000"]
`, sleep)
}

// loadSpecs writes benchConfig into dir and loads it as tend up would.
func loadSpecs(dir string) (map[string]program.Spec, error) {
	sleep := "/bin/sleep"
	if _, err := os.Stat(sleep); err != nil {
		sleep = "/usr/bin/sleep"
	}
	file := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(file, []byte(benchConfig(sleep)), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	specs := map[string]program.Spec{}
	for _, s := range cfg.Programs {
		specs[s.Name] = s
	}
	return specs, nil
}

// named is spec under another name (each variant's programs are its own).
func named(spec program.Spec, name string) program.Spec {
	spec.Name = name
	return spec
}

// treeOf is the tree a Manager of the variant gets: nil without cgroups.
func treeOf(cg *cgroups) *cgroup.Tree {
	if cg == nil {
		return nil
	}
	return cg.tree
}

func tracking(cg *cgroups) string {
	if cg == nil {
		return program.TrackingGroup
	}
	return program.TrackingCgroup
}

// crashLoop supervises /bin/false with zero backoff and counts the restarts
// in a window that opens after warmup.
func (r *rig) crashLoop(ctx context.Context, spec program.Spec, cg *cgroups, warmup, window time.Duration) (res Crash, err error) {
	res.Tracking = tracking(cg)
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
	m := r.manager(treeOf(cg))
	defer func() { err = errors.Join(err, shutdown(m)) }()
	if _, err := m.Add(named(spec, "crash_"+res.Tracking)); err != nil {
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
	res.Restarts, res.Events, res.Elapsed, res.CPU = n1-n0, ev1-ev0, measure.NewMs(t1.Sub(t0)), measure.NewMs(cpu1-cpu0)
	res.Failed, res.Others = failed.Load(), u0.othersSince()
	if res.Failed > 0 {
		return res, fmt.Errorf("%d spawns failed", res.Failed)
	}
	if res.Restarts == 0 {
		return res, errors.New("no restart in the window")
	}
	return res, nil
}

// router hands each instance's spawned and exited events to the channel
// registered for it; the latency phases read them in order.
type router struct {
	mu      sync.Mutex // guards chans
	chans   map[string]chan stamped
	dropped atomic.Int64
}

func newRouter() *router { return &router{chans: map[string]chan stamped{}} }

func (rt *router) see(s stamped) {
	if s.e.Kind != program.KindSpawned && s.e.Kind != program.KindExited && s.e.Kind != program.KindBackoff {
		return
	}
	rt.mu.Lock()
	ch := rt.chans[s.e.ID]
	rt.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- s:
	default: // a 64-deep buffer outlasts any hiccup of the reader
		rt.dropped.Add(1)
	}
}

func (rt *router) register(id string) <-chan stamped {
	ch := make(chan stamped, 64)
	rt.mu.Lock()
	rt.chans[id] = ch
	rt.mu.Unlock()
	return ch
}

func (rt *router) unregister(id string) {
	rt.mu.Lock()
	delete(rt.chans, id)
	rt.mu.Unlock()
}

// victim is one supervised sleep whose kills are timed.
type victim struct {
	m       *supervisor.Manager
	name    string
	id      string
	evs     <-chan stamped
	pid     int
	started time.Time // when the current run's spawned event was published
	res     *Latency
}

// add starts the victim's program and waits for its first run.
func (r *rig) add(ctx context.Context, rt *router, m *supervisor.Manager, spec program.Spec, res *Latency) (*victim, error) {
	v := &victim{m: m, name: spec.Name, id: program.InstanceID(spec.Name, 0), res: res}
	v.evs = rt.register(v.id)
	if _, err := m.Add(spec); err != nil {
		rt.unregister(v.id)
		return nil, err
	}
	first, err := next(ctx, v.evs, program.KindSpawned)
	if err != nil {
		return nil, err
	}
	v.pid, v.started = first.e.Data.(*program.Spawned).PID, first.at
	return v, nil
}

// kill waits gap with the victim at rest, SIGKILLs its run and records
// kill -> exited and kill -> replacement spawned in v.res.
func (r *rig) kill(ctx context.Context, v *victim, gap time.Duration) error {
	return r.killInto(ctx, v, gap, v.res)
}

// killInto is kill recording into res: the run's age when killed (default
// configs) and the wait a backoff event announced, if one came.
func (r *rig) killInto(ctx context.Context, v *victim, gap time.Duration, res *Latency) error {
	if err := r.waitRunning(ctx, v.id, v.pid, gap); err != nil {
		return err
	}
	t0 := time.Now()
	age := t0.Sub(v.started)
	if err := syscall.Kill(v.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", v.pid, err)
	}
	ex, err := next(ctx, v.evs, program.KindExited)
	if err != nil {
		return err
	}
	if got := ex.e.Data.(*program.Exited).PID; got != v.pid {
		return fmt.Errorf("%s: exited pid %d, killed %d", v.id, got, v.pid)
	}
	var wait time.Duration
	sp, err := next(ctx, v.evs, program.KindSpawned, program.KindBackoff)
	if err == nil && sp.e.Kind == program.KindBackoff {
		wait = time.Duration(sp.e.Data.(*program.Backoff).MS) * time.Millisecond
		sp, err = next(ctx, v.evs, program.KindSpawned)
	}
	if err != nil {
		return err
	}
	res.Exited = append(res.Exited, measure.NewMs(ex.at.Sub(t0)))
	res.Spawned = append(res.Spawned, measure.NewMs(sp.at.Sub(t0)))
	if res.Config != configZero {
		res.Ages = append(res.Ages, measure.NewMs(age))
		res.Backoffs = append(res.Backoffs, measure.NewMs(wait))
	}
	v.pid, v.started = sp.e.Data.(*program.Spawned).PID, sp.at
	return nil
}

// latencyZero kills a zero-backoff sleep in each variant (no cgroups, and
// cgroups when cg is set), alternating between them kill after kill, so
// that both see the same machine: kills per variant, each after gap at rest.
func (r *rig) latencyZero(ctx context.Context, spec program.Spec, cg *cgroups, kills int, gap time.Duration) (res []Latency, err error) {
	return r.latency(ctx, cg, configZero, spec, func(_ *router, vs []*victim) error {
		for i := range kills {
			for j := range vs {
				if err := r.kill(ctx, vs[(i+j)%len(vs)], gap); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// latencyDefault times what a user gets with every key at its default:
// backoff_initial is 1s, doubling per crash, counted from the run's start,
// so a run older than its backoff which is killed restarts at once. Each
// sample is a fresh program (crash_count 0 before its first crash, as for a
// long-running worker whose count stable_run_reset reset) killed once it is
// age old: its first crash. Then its replacement is killed too, its second
// crash: at ages.elapsed (past that crash's backoff, at most 2s) in even
// samples, at ages.waiting (within it) in odd ones, where the replacement
// waits out the rest. The variants take turns, each pair started together
// (the second's first run is then older than age: no matter, it is past
// its backoff either way).
func (r *rig) latencyDefault(ctx context.Context, spec program.Spec, cg *cgroups, kills int, age time.Duration, ages repeatAges, gap time.Duration) (res []Latency, err error) {
	repeats := map[string]*Latency{} // config + tracking -> samples
	repeat := func(v *victim, config string) *Latency {
		k := config + "/" + v.res.Tracking
		if repeats[k] == nil {
			repeats[k] = &Latency{Config: config, Tracking: v.res.Tracking}
		}
		return repeats[k]
	}
	res, err = r.latency(ctx, cg, configDefault, spec, func(rt *router, first []*victim) error {
		for i := range kills {
			vs := first
			if i > 0 {
				vs = nil
				for _, f := range first {
					v, err := r.add(ctx, rt, f.m, named(spec, fmt.Sprintf("%s_%d", f.name, i)), f.res)
					if err != nil {
						return err
					}
					vs = append(vs, v)
				}
			}
			config, again := configRepeatElapsed, ages.elapsed
			if i%2 == 1 {
				config, again = configRepeatWaiting, ages.waiting
			}
			// One variant's two kills, then the other's: a replacement
			// waiting out its backoff must not age the other's second run.
			for j := range vs {
				v := vs[(i+j)%len(vs)]
				if err := measure.Sleep(ctx, time.Until(v.started.Add(age))); err != nil {
					return err
				}
				if err := r.kill(ctx, v, gap); err != nil {
					return err
				}
				if err := measure.Sleep(ctx, time.Until(v.started.Add(again))); err != nil {
					return err
				}
				if err := r.killInto(ctx, v, gap, repeat(v, config)); err != nil {
					return err
				}
			}
			for _, v := range vs {
				if err := remove(v); err != nil {
					return err
				}
				rt.unregister(v.id)
			}
		}
		return nil
	})
	for _, config := range []string{configRepeatElapsed, configRepeatWaiting} {
		for _, l := range res[:min(len(res), 2)] {
			if rp := repeats[config+"/"+l.Tracking]; rp != nil {
				rp.Others = l.Others
				res = append(res, *rp)
			}
		}
	}
	return res, err
}

// repeatAges are the ages at which latencyDefault kills a program's second
// run: past its backoff, and within it.
type repeatAges struct{ elapsed, waiting time.Duration }

// latency runs body on one victim per variant, each in its own Manager,
// and returns the variants' samples.
func (r *rig) latency(ctx context.Context, cg *cgroups, config string, spec program.Spec, body func(*router, []*victim) error) (res []Latency, err error) {
	rt := newRouter()
	r.observe(rt.see)
	defer r.observe(nil)
	trees := []*cgroups{nil}
	if cg != nil {
		trees = append(trees, cg)
	}
	res = make([]Latency, len(trees))
	var vs []*victim
	for i, t := range trees {
		res[i] = Latency{Config: config, Tracking: tracking(t)}
		m := r.manager(treeOf(t))
		defer func() { err = errors.Join(err, shutdown(m)) }()
		v, err := r.add(ctx, rt, m, named(spec, config+"_"+res[i].Tracking), &res[i])
		if err != nil {
			return res, err
		}
		vs = append(vs, v)
	}
	u0 := sample()
	if err := body(rt, vs); err != nil {
		return res, err
	}
	others := u0.othersSince()
	for i := range res {
		res[i].Others = others
	}
	if n := rt.dropped.Load(); n > 0 {
		return res, fmt.Errorf("%d events dropped by the observer", n)
	}
	return res, nil
}

// remove removes the victim's program, waiting for its run to end.
func remove(v *victim) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return v.m.Remove(ctx, v.name)
}

// next returns the next event, failing on any kind but those given: an
// instance's events alternate spawned, exited (a backoff between them).
func next(ctx context.Context, evs <-chan stamped, kinds ...string) (stamped, error) {
	t := time.NewTimer(eventWait)
	defer t.Stop()
	select {
	case s := <-evs:
		if !slices.Contains(kinds, s.e.Kind) {
			return s, fmt.Errorf("%s: got %s event, want %s", s.e.ID, s.e.Kind, strings.Join(kinds, " or "))
		}
		return s, nil
	case <-t.C:
		return stamped{}, fmt.Errorf("no %s event within %v", strings.Join(kinds, " or "), eventWait)
	case <-ctx.Done():
		return stamped{}, ctx.Err()
	}
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
