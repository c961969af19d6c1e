package terminal

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// promptScreen is what an idle agent shows: some output and a prompt (as
// in vt's BenchmarkIdleScreen).
var promptScreen = []byte(strings.Repeat("\x1b[1mtool\x1b[0m: some output line of an idle agent's last turn\r\n", 30) + "\x1b[36m>\x1b[0m ")

// BenchmarkIdleTerminal reports the heap and goroutines an idle 120x40
// terminal holds, and the process's CPU while 200 of them idle (its master read by the epoll loops; the
// slave held open here as a child would hold it).
func BenchmarkIdleTerminal(b *testing.B) {
	for b.Loop() {
		const n = 200
		var slaves []*os.File
		var terms []*Terminal
		g0 := runtime.NumGoroutine()
		per := testutil.HeapPer(n, func() any {
			t, slave, err := Open(Options{})
			if err != nil {
				b.Fatal(err)
			}
			t.View(func(s *vt.Screen) { s.Feed(promptScreen) })
			slaves, terms = append(slaves, slave), append(terms, t)
			return t
		})
		b.ReportMetric(per, "bytes/terminal")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/terminal")
		b.ReportMetric(idleCPU(time.Second)*100, "%cpu-idle")
		for i := range terms {
			terms[i].Close()
			slaves[i].Close()
		}
	}
}

// idleCPU is the share of a core the process used over d, doing nothing.
func idleCPU(d time.Duration) float64 {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	time.Sleep(d)
	return float64(cpu()-start) / float64(d)
}
