package events

import (
	"fmt"
	"sync"
	"testing"
)

func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{0, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for range n {
				s := l.Subscribe(0)
				wg.Go(func() {
					for range s.C() {
					}
				})
			}
			e := spawned(4242)
			b.ReportAllocs()
			for b.Loop() {
				l.Publish(e)
			}
			b.StopTimer()
			l.Close()
			wg.Wait()
			b.ReportMetric(float64(l.CutOffs()), "cutoffs")
		})
	}
}
