package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/broker"
	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/supervisor"
)

// eventWait bounds every wait for an event; only a broken mechanism needs it.
const eventWait = 10 * time.Second

// auditMaxSize is audit_max_size's default, which the daemon passes on.
const auditMaxSize = 1 << 30

// stamped is an event as published, with the time Publish returned.
type stamped struct {
	e  program.Event
	at time.Time
}

// rig is what the daemon builds around its supervisors (internal/daemon's
// start): the state directory and its subdirectories, the audit log, one
// reaper for the process (subreaper on), the capture of the runs' output
// into log files through FIFOs, the broker with a process tree, runs.json
// recording each run, the intent record (intent.json) each instance keeps
// its state in, and the notify sockets. Each phase runs its own
// Managers on it, with or without the cgroup tree.
type rig struct {
	dir     string
	root    *statedir.Dir
	subs    []*statedir.Dir // logs, audit, fifo, notify
	notify  string          // the notify sockets' directory
	capture *spawn.Capture
	log     *events.Log
	reaper  *reaper.Reaper
	tree    *proctree.Tracker
	broker  *broker.Broker
	runs    *runs.File
	intents *kept.Intents
	hook    atomic.Pointer[func(stamped)] // the current phase's observer, or nil
}

// openRig opens a state directory in dir and starts the reaper. Only one
// rig may exist per process: the reaper owns wait4 for all of it.
func openRig(dir string) (r *rig, err error) {
	r = &rig{dir: dir}
	defer func() {
		if err != nil {
			r.closeDirs()
		}
	}()
	if r.root, err = statedir.Open(filepath.Join(dir, "state")); err != nil {
		return nil, err
	}
	var logs, audit, fifo, notify *statedir.Dir
	for _, sub := range []struct {
		name string
		d    **statedir.Dir
	}{{"logs", &logs}, {"audit", &audit}, {"fifo", &fifo}, {"notify", &notify}} {
		if *sub.d, err = r.root.Sub(sub.name); err != nil {
			return nil, err
		}
		r.subs = append(r.subs, *sub.d)
	}
	r.notify = notify.Path()
	if r.log, err = events.Open(events.Options{Files: audit, MaxSize: auditMaxSize}); err != nil {
		return nil, err
	}
	r.reaper = reaper.New()
	if err := r.reaper.Start(true); err != nil {
		r.log.Close()
		return nil, err
	}
	r.capture = spawn.NewCapture(spawn.CaptureOptions{Logs: logs, FIFO: fifo})
	r.tree = proctree.New()
	r.broker = broker.New(r.publish, nil, r.tree)
	r.runs = runs.Open(r.root, nil)
	r.intents = kept.OpenIntents(r.root, nil)
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

// record is the daemon's Record: runs.json learns each run put in place.
func (r *rig) record(id string, pid, run int, started time.Time) {
	if pid == 0 {
		r.runs.Delete(id)
		return
	}
	ticks, err := reaper.StartTicks(pid)
	if err != nil {
		r.runs.Delete(id)
		return
	}
	r.runs.Set(runs.Record{ID: id, PID: pid, StartTicks: ticks, Run: run, StartedAt: started})
}

// manager is a Manager with the daemon's Deps; cg nil runs without cgroups.
func (r *rig) manager(cg *cgroup.Tree) *supervisor.Manager {
	return supervisor.NewManager(supervisor.Deps{
		Reaper: r.reaper, Publish: r.publish, Update: r.broker.Update,
		Rand: rand.Float64, Capture: r.capture, NotifyDir: r.notify,
		Cgroups: cg, Tree: r.tree, Record: r.record, Intents: r.intents,
	}, r.broker.Forget)
}

// shutdown stops every instance of m, whether or not the phase was cut short.
func shutdown(m *supervisor.Manager) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Shutdown(ctx)
}

// close kills and reaps any child still left, stops the reaper and closes
// the audit log, runs.json and the state directory.
func (r *rig) close() error {
	r.observe(nil)
	var err error
	if left := killChildren(r.reaper); len(left) > 0 {
		err = fmt.Errorf("children left after cleanup: %v", left)
	}
	r.reaper.Stop()
	r.capture.Close()
	err = errors.Join(err, r.runs.Close(), r.intents.Close())
	if n := r.log.WriteErrors(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d audit write errors: %v", n, r.log.Err()))
	}
	err = errors.Join(err, r.log.Close())
	r.closeDirs()
	return err
}

func (r *rig) closeDirs() {
	for _, d := range r.subs {
		d.Close()
	}
	if r.root != nil {
		r.root.Close()
	}
}

// waitRunning pauses gap, then checks that the broker shows pid running
// for id: the instance is at rest before the next kill.
func (r *rig) waitRunning(ctx context.Context, id string, pid int, gap time.Duration) error {
	if err := measure.Sleep(ctx, gap); err != nil {
		return err
	}
	deadline := time.Now().Add(eventWait)
	for {
		st, err := r.broker.Status(id)
		if err == nil && st.State == program.StateRunning && st.PID != nil && *st.PID == pid {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not running as pid %d (state %q)", id, pid, st.State)
		}
		if err := measure.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
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
