package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// The benchmark's phases, briefly: they produce numbers and leave nothing
// behind. Never how fast.
func TestTerminalBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tend and runs three daemons and a tmux server")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	wd, _ := os.Getwd()
	root, err := measure.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	o := options{phases: allPhases, n: 20, idle: 500 * time.Millisecond, settle: 100 * time.Millisecond,
		keys: 20, keyGap: time.Millisecond, floodBytes: 300_000, reps: 1, floodLimit: time.Minute,
		cold: 1, coldGap: 50 * time.Millisecond, requests: 5, cli: 3}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	r, err := run(context.Background(), root, o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	if e := r.Echo; e == nil || len(e.Tend) != o.keys || len(e.Tmux) != o.keys || len(e.TendScreen) != o.cli || len(e.TmuxCapture) != o.cli {
		t.Errorf("echo: %+v", e)
	}
	if f := r.Flood; f == nil || len(f.Runs) != 4 {
		t.Errorf("flood: %+v", f)
	} else {
		for _, run := range f.Runs {
			if run.Written <= 0 || run.Shown <= 0 || run.Attached != (run.ClientBytes > 0) {
				t.Errorf("flood run: %+v", run)
			}
		}
	}
	if r.IOLeft != 0 {
		t.Errorf("%d processes left after the echo and flood phases", r.IOLeft)
	}
	if s := r.Screen; s == nil || len(s.APICold) != 1 || len(s.CLICold) != 1 || len(s.APIWarm) != 5 || len(s.CLIWarm) != 3 || len(s.Version) != 3 || s.Bytes == 0 {
		t.Errorf("screen: %+v", s)
	}
	for name, f := range map[string]*Fleet{"plain": r.Plain, "tty": r.TTY} {
		if f == nil || f.Start <= 0 || f.Daemon.PSS <= 0 || f.Daemon.FDs <= 0 || f.Down <= 0 {
			t.Fatalf("%s: %+v", name, f)
		}
		if f.Left != 0 {
			t.Errorf("%s: %d processes left after tend down", name, f.Left)
		}
	}
	if r.TTY.Keeper == nil || r.TTY.Keeper.FDs == 0 || r.TTY.Daemon.Kinds["ptmx"] < 20 {
		t.Errorf("tty fleet: keeper %+v, daemon descriptors %v", r.TTY.Keeper, r.TTY.Daemon.Kinds)
	}
	if r.InProc == nil || r.InProc.ScreenHeap <= 0 || r.InProc.TerminalHeap <= 0 {
		t.Errorf("in process: %+v", r.InProc)
	}

	if kids := measure.Children(); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// A results file reads back into the report it was written with.
func TestReportRederives(t *testing.T) {
	dirs, _ := os.ReadDir("results")
	if len(dirs) == 0 {
		t.Skip("no results committed")
	}
	for _, d := range dirs {
		var r Results
		if err := measure.ReadResults("results/"+d.Name(), &r); err != nil {
			t.Fatal(err)
		}
		var b io.Writer = io.Discard
		printReport(b, r)
	}
}

func TestMarkers(t *testing.T) {
	for in, want := range map[string][]int{
		"x END-12-DNE y END-3-DNE":  {12, 3},
		"END-1-DN END-2-DNE END-":   {2},
		"\x1b[32mEND-7-DNE\x1b[0m":  {7},
		"END--DNE END-1234567890-D": nil,
	} {
		if got := markers([]byte(in)); !equalInts(got, want) {
			t.Errorf("markers(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestStripper(t *testing.T) {
	var s stripper
	var got []byte
	for _, part := range []string{"a\x1b[3", "8;5;1mb\x1b]0;tit", "le\x07c\x1b", "(Bd\x1bP1$r\x1b\\e\r\nf"} {
		got = s.text(got, []byte(part))
	}
	if string(got) != "abcdef" {
		t.Errorf("stripped %q, want %q", got, "abcdef")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
