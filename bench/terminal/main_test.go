package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// The benchmark's phases, briefly: they produce numbers and leave nothing
// behind. Never how fast.
func TestTerminalBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tend and runs two daemons")
	}
	wd, _ := os.Getwd()
	root, err := measure.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	r, err := run(context.Background(), root, 20, 500*time.Millisecond, 100*time.Millisecond, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]Fleet{"plain": r.Plain, "tty": r.TTY} {
		if f.Start <= 0 || f.Daemon.PSS <= 0 || f.Daemon.FDs <= 0 || f.Down <= 0 {
			t.Errorf("%s: %+v", name, f)
		}
		if f.Left != 0 {
			t.Errorf("%s: %d processes left after tend down", name, f.Left)
		}
	}
	if r.TTY.Keeper == nil || r.TTY.Keeper.FDs == 0 || r.TTY.Daemon.Kinds["ptmx"] < 20 {
		t.Errorf("tty fleet: keeper %+v, daemon descriptors %v", r.TTY.Keeper, r.TTY.Daemon.Kinds)
	}
	if r.InProc.ScreenHeap <= 0 || r.InProc.TerminalHeap <= 0 {
		t.Errorf("in process: %+v", r.InProc)
	}
	if kids := measure.Children(); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
}
