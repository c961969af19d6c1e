// Package parallel spreads a loop over the machine's cores. A listing of
// ten thousand instances derives and encodes each one: small independent
// pieces of work that two cores finish in half the time of one.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each calls fn(i) for every i in [0, n), in chunks of chunk indexes taken
// by as many goroutines as there are cores (one goroutine, the caller's,
// when n fits one chunk). fn must be safe to call concurrently for
// different i. Each returns when every call has.
func Each(n, chunk int, fn func(i int)) {
	chunk = max(chunk, 1)
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					fn(i)
				}
			}
		})
	}
	wg.Wait()
}

// Parts splits [0, n) into at most one range per core, each at least min
// long (fewer parts for a short n), and returns their bounds: part k is
// [bounds[k], bounds[k+1]).
func Parts(n, least int) []int {
	parts := max(1, min(runtime.GOMAXPROCS(0), n/max(least, 1)))
	bounds := make([]int, parts+1)
	for k := range parts + 1 {
		bounds[k] = n * k / parts
	}
	return bounds
}
