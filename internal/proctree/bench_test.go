package proctree

import (
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSample measures one fresh sample (maxAge 0) of a real run: a
// leader alone, and a shell leader with three children.
func BenchmarkSample(b *testing.B) {
	for _, n := range []int{0, 3} {
		b.Run("children="+strconv.Itoa(n), func(b *testing.B) {
			var cmd *exec.Cmd
			var kids []int
			if n == 0 {
				cmd, _ = startRun(b, nil, nil, nil, "sleep", "300")
			} else {
				script, names := "", []string{}
				for i := range n {
					name := "k" + strconv.Itoa(i)
					script += "sleep 300 & echo " + name + " $!\n"
					names = append(names, name)
				}
				var p map[string]int
				cmd, p = startRun(b, nil, names, names, "/bin/sh", "-c", script+"wait")
				for _, name := range names {
					kids = append(kids, p[name])
				}
			}
			leader := cmd.Process.Pid
			waitExec(b, "sleep", 0, kids...)
			tr := New()
			b.Cleanup(func() { tr.Forget(leader) })
			if procs, _, _ := tr.Sample(leader, 0); len(procs) != n+1 {
				b.Fatalf("sampled %d processes, want %d", len(procs), n+1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tr.Monitor(leader) // the memory watchdog's steady path
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n+1), "ns/proc")
		})
	}
}

// A steady monitored tree costs one allocation per sample: the result.
func TestFakeSteadyAllocs(t *testing.T) {
	f, tr := newFake(t)
	fakeTree(f)
	tr.selfEvery = time.Hour // the orphan index's re-listing is amortised over every run
	tr.Monitor(100)
	if n := testing.AllocsPerRun(100, func() { tr.Monitor(100) }); n != 1 {
		t.Errorf("a sample of a steady tree allocates %v times", n)
	}
}
