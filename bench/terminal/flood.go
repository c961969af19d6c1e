package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Flood is a program writing Bytes of text lines to its terminal as fast
// as it can (floodScript), under tend and in a tmux pane, with no client
// and with one attached client reading (tend attach; tmux attach), Reps
// times each, the two sides alternating.
type Flood struct {
	Bytes int64      `json:"bytes"`
	Reps  int        `json:"reps"`
	Runs  []FloodRun `json:"runs"`
}

// FloodRun is one flood. Its clock starts as the program is told to write.
// Written is when the program reported it had written everything (its
// terminal then holds at most a pty buffer the server has not read).
// Shown is the end point: with no client, the first poll after Written
// whose screen (GET /v1/screen through tend's client; tmux capture-pane
// -p) shows the marker that followed the bytes; with a client, the moment
// the marker came out of the client's pty. CPU is utime+stime from
// /proc/PID/stat over the run, ticks of 10 ms.
type FloodRun struct {
	Side        string     `json:"side"` // tend or tmux
	Attached    bool       `json:"attached"`
	Marker      int        `json:"marker"` // its END-n-DNE
	Written     measure.Ms `json:"written_ms"`
	Shown       measure.Ms `json:"shown_ms"`
	ServerCPU   measure.Ms `json:"server_cpu_ms"` // tend's daemon; tmux's server
	KeeperCPU   measure.Ms `json:"keeper_cpu_ms"` // tend's keeper (it reads the terminals and writes the logs)
	ClientCPU   measure.Ms `json:"client_cpu_ms"` // the attached client
	ClientBytes int64      `json:"client_bytes"`  // what the attached client drew
}

// floodPhase measures r's flood programs.
func floodPhase(ctx context.Context, r *ioRig, o options) (*Flood, error) {
	f := &Flood{Bytes: o.floodBytes, Reps: o.reps}
	keeper := r.d.keeper()
	server := map[string]int{"tend": r.d.pid(), "tmux": r.tm.pid()}
	marker := 0
	shown := map[string]string{"tend": "ready", "tmux": "ready"} // what side's screen shows last
	for _, attached := range []bool{false, true} {
		clients := map[string]*ptyClient{}
		marks := map[string]chan mark{}
		stop := func() error {
			var err error
			for side, c := range clients {
				if e := c.stop(detachKeys[side]); e != nil && err == nil {
					err = e
				}
			}
			return err
		}
		if attached {
			for _, side := range sides {
				c, err := r.attach(side, "flood", shown[side])
				if err != nil {
					stop()
					return nil, err
				}
				clients[side], marks[side] = c, make(chan mark, 16)
				c.pump(marks[side])
			}
		}
		for rep := range o.reps {
			for j := range sides {
				side := sides[(rep+j)%2]
				marker++
				run := FloodRun{Side: side, Attached: attached, Marker: marker}
				c := clients[side]
				var c0 time.Duration
				var d0 int64
				if c != nil {
					c0, d0 = procCPU(c.pid()), c.drawn.Load()
				}
				s0, k0 := procCPU(server[side]), procCPU(keeper)
				t0 := time.Now()
				err := r.flood(ctx, side, marker, marks[side], t0, &run, o)
				if err != nil {
					stop()
					return nil, err
				}
				run.ServerCPU = measure.NewMs(procCPU(server[side]) - s0)
				if side == "tend" {
					run.KeeperCPU = measure.NewMs(procCPU(keeper) - k0)
				}
				if c != nil {
					run.ClientCPU, run.ClientBytes = measure.NewMs(procCPU(c.pid())-c0), c.drawn.Load()-d0
				}
				f.Runs = append(f.Runs, run)
				shown[side] = fmt.Sprintf("END-%d-DNE", marker)
			}
		}
		if err := stop(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// flood runs one flood on side, marker n, started at t0, and fills in
// run's times.
func (r *ioRig) flood(ctx context.Context, side string, n int, marks <-chan mark, t0 time.Time, run *FloodRun, o options) error {
	if err := r.startFlood(side, n); err != nil {
		return err
	}
	if err := r.floodWritten(side, n, o.floodLimit); err != nil {
		return err
	}
	run.Written = measure.NewMs(time.Since(t0))
	want := fmt.Sprintf("END-%d-DNE", n)
	if marks == nil {
		for deadline := time.Now().Add(o.floodLimit); ; {
			ok, err := r.shows(side, "flood", want)
			if err != nil {
				return err
			}
			if ok {
				run.Shown = measure.NewMs(time.Since(t0))
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: the flood's screen shows no %s", side, want)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	limit := time.After(o.floodLimit)
	for {
		select {
		case m := <-marks:
			if m.n == n {
				run.Shown = measure.NewMs(m.at.Sub(t0))
				return nil
			}
		case <-limit:
			return fmt.Errorf("%s: the attached client drew no %s", side, want)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
