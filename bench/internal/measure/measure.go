// Package measure holds what the benchmark programs (bench/restart,
// bench/scale) read and write the same way: the machine's CPU use and
// load, this process's children, nearest-rank percentiles, a sleep that a
// cancelled context cuts short, and the results directory of a run (its
// JSON, the machine, the commit measured) from which reports are derived.
package measure

import (
	"context"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tick is one clock tick of /proc's CPU counters: USER_HZ is 100 on every
// Linux ABI Go supports.
const Tick = 10 * time.Millisecond

// MachineBusy sums the non-idle fields of /proc/stat's cpu line (user nice
// system idle iowait irq softirq steal), or -1.
func MachineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		if i != 3 && i != 4 { // idle, iowait
			ticks += n
		}
	}
	return time.Duration(ticks) * Tick
}

// Loadavg is the first three fields of /proc/loadavg, or "?".
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Children lists this process's children (alive or zombie).
func Children() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds.
func Percentile[D ~int64](ds []D, p float64) D {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Span formats one measure over several runs with f: the value alone for
// one run, "min–max" for more, "n/a" for none.
func Span(vals []float64, f func(float64) string) string {
	switch len(vals) {
	case 0:
		return "n/a"
	case 1:
		return f(vals[0])
	}
	return f(slices.Min(vals)) + " – " + f(slices.Max(vals))
}

// Verdict says whether each run met a target: PASS when all did, MISS
// when none did, "k/n PASS" between; "" with no run.
func Verdict(ok []bool) string {
	n := 0
	for _, b := range ok {
		if b {
			n++
		}
	}
	switch {
	case len(ok) == 0:
		return ""
	case n == len(ok):
		return "PASS"
	case n == 0:
		return "MISS"
	}
	return strconv.Itoa(n) + "/" + strconv.Itoa(len(ok)) + " PASS"
}
