package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/terminal"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Fleet is one daemon's figures with N runs.
type Fleet struct {
	Start      measure.Ms `json:"start_ms"`      // tend up exec'd until every run runs
	Daemon     Memory     `json:"daemon"`        // after the fleet settled
	DaemonIdle measure.Ms `json:"daemon_cpu_ms"` // CPU over the idle window
	Keeper     *Memory    `json:"keeper,omitempty"`
	KeeperIdle measure.Ms `json:"keeper_cpu_ms,omitempty"`
	Down       measure.Ms `json:"down_ms"`     // tend down until the daemon exited
	Left       int        `json:"left_behind"` // processes found after tend down (must be 0)
}

// InProc is the heap of terminals made in this process.
type InProc struct {
	ScreenHeap   int64 `json:"screen_heap_bytes"`   // per 120x40 screen with the prompt drawn
	TerminalHeap int64 `json:"terminal_heap_bytes"` // per terminal (pty, screen, epoll watch), the prompt drawn
	Goroutines   int   `json:"terminal_goroutines"` // added by N terminals
	// HistoryHeap is what tty_history's default costs a screen once 2,000
	// lines of 120 columns have scrolled off its top, beyond the screen.
	HistoryHeap int64 `json:"history_heap_bytes"`
}

const prompt = `printf '> '; exec sleep 100000`

// fleetProgram is what each fleet run runs: the prompt, after history
// lines of 120 columns (numbered) that scroll off its screen.
func fleetProgram(history int) string {
	if history <= 0 {
		return prompt
	}
	return fmt.Sprintf(`awk 'BEGIN { for (i = 1; i <= %d; i++) printf "%%0120d\n", i }'; %s`, history+40, prompt)
}

// fleet starts a daemon with n runs of the prompt, with or without tty, and
// measures it; with reads, it also times the screen reads of the tty fleet
// (after the idle window, which they would disturb).
func fleet(ctx context.Context, bin, dir string, o options, tty bool) (Fleet, *ScreenReads, string, error) {
	var f Fleet
	cfg := fmt.Sprintf("[program.p]\nshell = %q\ninstances = %d\ntty = %v\nstop_grace = \"2s\"\n", fleetProgram(o.history), o.n, tty)
	d, err := startDaemon(bin, dir, cfg)
	if err != nil {
		return f, nil, "", err
	}
	defer func() {
		d.kill()
		killOrphans()
	}()
	ids, tracking, err := d.waitRunning(ctx, o.n, 5*time.Minute)
	if err != nil {
		return f, nil, "", err
	}
	f.Start = measure.NewMs(time.Since(d.t0))
	if err := measure.Sleep(ctx, o.settle); err != nil {
		return f, nil, "", err
	}
	keeper := 0
	if tty {
		if keeper = d.keeper(); keeper == 0 {
			return f, nil, "", errors.New("no keeper")
		}
	}
	d0, k0 := cpuTime(d.pid()), cpuTime(keeper)
	if err := measure.Sleep(ctx, o.idle); err != nil {
		return f, nil, "", err
	}
	f.DaemonIdle = measure.NewMs(cpuTime(d.pid()) - d0)
	if f.Daemon, err = readMemory(d.pid()); err != nil {
		return f, nil, "", err
	}
	if keeper != 0 {
		f.KeeperIdle = measure.NewMs(cpuTime(keeper) - k0)
		m, err := readMemory(keeper)
		if err != nil {
			return f, nil, "", err
		}
		f.Keeper = &m
	}
	var reads *ScreenReads
	if tty {
		if reads, err = screenReads(ctx, d, ids, o); err != nil {
			return f, nil, "", fmt.Errorf("screen reads: %w", err)
		}
	}
	down, err := d.down()
	if err != nil {
		return f, nil, "", err
	}
	f.Down = measure.NewMs(down)
	time.Sleep(200 * time.Millisecond)
	f.Left = killOrphans()
	if keeper != 0 && syscall.Kill(keeper, 0) == nil {
		f.Left++
	}
	return f, reads, tracking, nil
}

// inProcess measures the heap of n screens, then of n terminals, each with
// the prompt drawn.
func inProcess(n int) (InProc, error) {
	var r InProc
	heap := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	h0 := heap()
	screens := make([]*vt.Screen, n)
	for i := range screens {
		screens[i] = vt.NewScreen(vt.DefaultSize)
		screens[i].Feed([]byte("> "))
	}
	r.ScreenHeap = (heap() - h0) / int64(n)
	runtime.KeepAlive(screens)
	screens = nil

	// The history: 2,000 lines of a coloured build log, up to 120 columns.
	var log strings.Builder
	for i := range 2000 + vt.DefaultSize.Rows {
		fmt.Fprintf(&log, "\x1b[32m[%05d]\x1b[0m compiling internal/package%d/file_%d.go \x1b[1;33mwarning\x1b[0m: unused variable x%d in %s\r\n",
			i, i%97, i, i*7, strings.Repeat("the quick brown fox ", i%4))
	}
	withHistory := func(lines int) int64 {
		h0 := heap()
		keep := make([]*vt.Screen, min(n, 200))
		for i := range keep {
			keep[i] = vt.NewScreen(vt.DefaultSize)
			keep[i].SetHistory(lines)
			keep[i].Feed([]byte(log.String()))
		}
		h := (heap() - h0) / int64(len(keep))
		runtime.KeepAlive(keep)
		return h
	}
	heap() // the packers' pools from before are gone after two collections
	without := withHistory(0)
	heap()
	r.HistoryHeap = withHistory(2000) - without

	terms := make([]*terminal.Terminal, 0, n)
	slaves := make([]*os.File, 0, n)
	defer func() {
		for _, t := range terms {
			t.Close()
		}
		for _, s := range slaves {
			s.Close()
		}
	}()
	if t, s, err := terminal.Open(terminal.Options{}); err == nil { // whatever the first terminal sets up exists before the baseline
		t.Close()
		s.Close()
	}
	h0, g0 := heap(), runtime.NumGoroutine()
	for range n {
		t, s, err := terminal.Open(terminal.Options{})
		if err != nil {
			return r, err
		}
		terms, slaves = append(terms, t), append(slaves, s)
		t.Feed([]byte("> ")) // as the daemon's follower hands on what the keeper read
	}
	r.TerminalHeap = (heap() - h0) / int64(n)
	r.Goroutines = runtime.NumGoroutine() - g0
	return r, nil
}

// fleetDir is where a fleet's config and state directory go.
func fleetDir(work string, tty bool) string {
	return filepath.Join(work, map[bool]string{false: "plain", true: "tty"}[tty])
}
