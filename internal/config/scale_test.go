package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fleet is a config of n programs, each its own [program.pN] table.
func fleet(n int) []byte {
	var b strings.Builder
	b.WriteString("[defaults]\nstop_grace = \"5s\"\n\n")
	for i := range n {
		fmt.Fprintf(&b, "[program.p%d]\ncommand = [\"sleep\", \"100000\"]\n", i)
	}
	return []byte(b.String())
}

// loadCost is the median wall and CPU time of runs loads of each config,
// measured in turns so that a change in the machine's load hits all alike.
func loadCost(tb testing.TB, runs int, configs ...[]byte) (wall, cpu []time.Duration) {
	tb.Helper()
	paths := make([]string, len(configs))
	for i, data := range configs {
		paths[i] = filepath.Join(tb.TempDir(), "tend.toml")
		if err := os.WriteFile(paths[i], data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	walls := make([][]time.Duration, len(configs))
	cpus := make([][]time.Duration, len(configs))
	for range runs {
		for i, path := range paths {
			runtime.GC()
			start, startCPU := time.Now(), cpuTime(tb)
			if _, err := Load(path); err != nil {
				tb.Fatal(err)
			}
			cpus[i] = append(cpus[i], cpuTime(tb)-startCPU)
			walls[i] = append(walls[i], time.Since(start))
		}
	}
	for i := range configs {
		wall = append(wall, median(walls[i]))
		cpu = append(cpu, median(cpus[i]))
	}
	return wall, cpu
}

// cpuTime is the CPU time this process has used, all threads (the garbage
// collector's too).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// Loading 10,000 programs costs about four times loading 2,500 (4.5-5x
// here, as memory caches help a small load more): the load is linear in the
// number of programs; with go-toml's decode it was 9-10x. CPU time, not wall
// time, so that other work on the machine counts less; no absolute figure
// is asserted. The ratio asserted is the one without garbage collection:
// the collector does almost nothing for a heap under its 4 MiB minimum
// (2,500 programs), which would make the larger load look worse than linear
// (it is linear beyond: 20,000 programs cost twice 10,000). A noisy machine
// gets three tries; a quadratic load fails them all.
func TestLoadTimeLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,000 programs")
	}
	small, large := fleet(2500), fleet(10000)
	wall, cpu := loadCost(t, 5, small, large)
	t.Logf("median load: 2,500 programs %v wall, %v CPU; 10,000 programs %v wall, %v CPU",
		wall[0], cpu[0], wall[1], cpu[1])

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ratios []float64
	for range 3 {
		_, cpu = loadCost(t, 7, small, large)
		ratio := float64(cpu[1]) / float64(cpu[0])
		t.Logf("without GC: 2,500 programs %v CPU, 10,000 programs %v CPU: %.1fx", cpu[0], cpu[1], ratio)
		if ratio < 6 {
			return
		}
		ratios = append(ratios, ratio)
	}
	t.Errorf("10,000 programs cost %.1fx 2,500 in CPU time: worse than linear", ratios)
}

func BenchmarkLoad10000(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tend.toml")
	if err := os.WriteFile(path, fleet(10000), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
