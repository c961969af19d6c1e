package testutil

import "runtime"

// HeapPer measures the heap that each of n things made by mk holds (the
// terminal's and the emulator's size tests and benchmarks).
func HeapPer(n int, mk func() any) float64 {
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
