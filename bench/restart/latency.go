package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/program"
)

// latencyResult is the exit-latency phase: one sample per kill.
type latencyResult struct {
	exited  []time.Duration // kill -> exited event published
	spawned []time.Duration // kill -> spawned event of the replacement published
	others  float64         // CPUs kept busy by other processes during the kills
}

// exitLatency supervises `sleep 100000` with zero backoff and SIGKILLs it
// kills times, gap after each replacement started, timing the kill to the
// exited event and to the replacement's spawned event. spawn.Start returns
// only after the replacement has exec'd (ForkExec waits for the exec), so
// the spawned event is no earlier than the exec.
func (r *rig) exitLatency(ctx context.Context, kills int, gap time.Duration) (res latencyResult, err error) {
	// Events of one instance are published by its goroutine, in order; a
	// 4096-deep buffer outlasts any hiccup of this reader.
	evs := make(chan stamped, 4096)
	var dropped atomic.Int64
	r.observe(func(s stamped) {
		if s.e.Kind != program.KindSpawned && s.e.Kind != program.KindExited {
			return
		}
		select {
		case evs <- s:
		default:
			dropped.Add(1)
		}
	})
	defer r.observe(nil)
	m := r.manager()
	defer func() { err = errors.Join(err, shutdown(m)) }()
	ids, err := m.Add(benchSpec("sleeper", "sleep", "100000"))
	if err != nil {
		return res, err
	}
	first, err := next(ctx, evs, program.KindSpawned)
	if err != nil {
		return res, err
	}
	pid := first.e.Data.(*program.Spawned).PID
	u0 := sample()
	for range kills {
		if err := r.waitRunning(ctx, ids[0], pid, gap); err != nil {
			return res, err
		}
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return res, fmt.Errorf("kill %d: %w", pid, err)
		}
		ex, err := next(ctx, evs, program.KindExited)
		if err != nil {
			return res, err
		}
		if got := ex.e.Data.(*program.Exited).PID; got != pid {
			return res, fmt.Errorf("exited pid %d, killed %d", got, pid)
		}
		sp, err := next(ctx, evs, program.KindSpawned)
		if err != nil {
			return res, err
		}
		res.exited = append(res.exited, ex.at.Sub(t0))
		res.spawned = append(res.spawned, sp.at.Sub(t0))
		pid = sp.e.Data.(*program.Spawned).PID
	}
	res.others = u0.othersSince()
	if n := dropped.Load(); n > 0 {
		return res, fmt.Errorf("%d events dropped by the observer", n)
	}
	return res, nil
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

// next returns the next event of kind, failing on any other kind: the
// instance's events must alternate spawned, exited.
func next(ctx context.Context, evs <-chan stamped, kind string) (stamped, error) {
	t := time.NewTimer(eventWait)
	defer t.Stop()
	select {
	case s := <-evs:
		if s.e.Kind != kind {
			return s, fmt.Errorf("got %s event, want %s", s.e.Kind, kind)
		}
		return s, nil
	case <-t.C:
		return stamped{}, fmt.Errorf("no %s event within %v", kind, eventWait)
	case <-ctx.Done():
		return stamped{}, ctx.Err()
	}
}
