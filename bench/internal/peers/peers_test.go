package peers

import (
	"math"
	"testing"
)

// The run RESULTS.md was rendered from is kept in the repository.
const kept = "../../peers/results/20261202T145158Z"

func TestLoadKeptRun(t *testing.T) {
	r, err := Load(kept)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stamp != "20261202T145158Z" {
		t.Errorf("stamp %q", r.Stamp)
	}
	if l := r.Latency["runit"]; l.Exec.N != 30 || math.Abs(l.Exec.Median-3.1) > 0.05 {
		t.Errorf("runit exec: %+v", l.Exec)
	}
	if c := r.Crash["pm2"]; math.Abs(c.Rate.Median-213.3) > 0.05 {
		t.Errorf("pm2 rate: %+v", c.Rate)
	}
	s := r.Scale["s6"][1000]
	if len(s) != 1 || !s[0].Ok() || math.Abs(s[0].UpS-2.7) > 0.05 {
		t.Errorf("s6 at 1000: %+v", s)
	}
	if len(r.Scale["tend"][100]) != 3 {
		t.Errorf("tend at 100: %d runs", len(r.Scale["tend"][100]))
	}
	if v, ok := r.FloorMedian("go", "spawn-forkexec", 1, true); !ok || v < 1000 {
		t.Errorf("Go floor %v %v", v, ok)
	}
	if got := Peers(r.Latency); len(got) != 5 || got[0] != "pm2" {
		t.Errorf("peers %v", got)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty directory loaded")
	}
}

func TestRelFind(t *testing.T) {
	root := t.TempDir()
	if got := Rel(root+"/bench/peers/results/X", root); got != "bench/peers/results/X" {
		t.Errorf("Rel inside the root = %q", got)
	}
	if got := Rel("/elsewhere/X", root); got != "/elsewhere/X" {
		t.Errorf("Rel outside the root = %q", got)
	}
	if _, err := Find(kept, "/nonexistent"); err != nil {
		t.Errorf("Find of a path relative to here: %v", err)
	}
}

// A scale file as bench_scale.py writes it since issue 22 (a small run of
// tend, tend-nocgroup, runit and go-floor at 1,000): cold listings, peaks
// and the floor's loop are read.
func TestLoadIssue22Fields(t *testing.T) {
	r, err := Load("testdata/issue22")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"tend", "tend-nocgroup", "runit"} {
		s := r.Scale[tool][1000]
		if len(s) != 1 || !s[0].Ok() || s[0].ListCold.N != 3 || s[0].List.N != 3 || s[0].PeakPSSKB < s[0].PSSKB || s[0].PSSKB <= 0 {
			t.Errorf("%s at 1000: %+v", tool, s)
		}
	}
	f := r.Scale["go-floor"][1000]
	if len(f) != 1 || !f[0].Ok() || f[0].Loop.Seconds <= 0 || f[0].UpS < f[0].Loop.Seconds {
		t.Errorf("go-floor at 1000: %+v", f)
	}
	if got := Peers(r.Scale); len(got) != 1 || got[0] != "runit" {
		t.Errorf("peers %v: want runit alone (not tend's modes, not the floor)", got)
	}
}
