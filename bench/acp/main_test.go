package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// TestMain runs this test binary as the bench agent when asked to, as the
// benchmark runs itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		agentMain()
		return
	}
	os.Exit(m.Run())
}

// TestPhasesBriefly runs every phase at a tiny size and checks that each
// produces figures and that the report reads them; never how fast.
func TestPhasesBriefly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tend and starts agents")
	}
	out := filepath.Join(t.TempDir(), "results")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := run(ctx, options{phases: []string{"prompt", "stream", "idle"}, prompts: 5, streamMB: 1, n: 3, idle: time.Second, asks: 3}, out)
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := measure.ReadResults(dir, &r); err != nil {
		t.Fatal(err)
	}
	if r.Prompt == nil || len(r.Prompt.TendEnd) != 5 || len(r.Prompt.DirectFirst) != 5 || r.Prompt.TendFirst[0] <= 0 {
		t.Errorf("prompt phase: %+v", r.Prompt)
	}
	if r.Streams == nil || r.Streams.TendBytes != 1<<20 || r.Streams.DirectBytes != 1<<20 {
		t.Errorf("stream phase: %+v", r.Streams)
	}
	if r.Idle == nil || len(r.Idle.ToStatus) != 3 || len(r.Idle.ToEvent) != 3 || r.Idle.PSSPeak <= 0 {
		t.Errorf("idle phase: %+v", r.Idle)
	}
	rep := string(render(&r))
	for _, want := range []string{"first chunk p50", "MB/s", "per agent", "permission request"} {
		if !strings.Contains(rep, want) {
			t.Errorf("the report lacks %q:\n%s", want, rep)
		}
	}
	t.Log("\n" + rep)
}
