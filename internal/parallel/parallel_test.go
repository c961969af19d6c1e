package parallel

import (
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 5, 256, 257, 10000} {
		for _, chunk := range []int{0, 1, 7, 256} {
			seen := make([]atomic.Int32, n)
			Each(n, chunk, func(i int) { seen[i].Add(1) })
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("n=%d chunk=%d: index %d called %d times", n, chunk, i, c)
				}
			}
		}
	}
}

func TestPartsCoverTheRange(t *testing.T) {
	for _, n := range []int{0, 1, 10, 999, 10000} {
		for _, least := range []int{0, 1, 100, 5000} {
			b := Parts(n, least)
			if b[0] != 0 || b[len(b)-1] != n {
				t.Fatalf("n=%d least=%d: bounds %v do not span [0,%d)", n, least, b, n)
			}
			for k := 1; k < len(b); k++ {
				if b[k] < b[k-1] {
					t.Fatalf("n=%d least=%d: bounds %v go back", n, least, b)
				}
			}
		}
	}
}
