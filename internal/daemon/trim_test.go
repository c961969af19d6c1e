package daemon

import "testing"

// The daemon hands memory back when, gone quiet, it holds much more heap
// than it uses.
func TestShouldTrim(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name       string
		held, live uint64
		want       bool
	}{
		{"after a start", 30 * mb, 7 * mb, true},
		{"just trimmed", 8 * mb, 7 * mb, false},
		{"held at the floor's headroom after a burst", 10 * mb, 7 * mb, true},
		{"small daemon, small excess", 2*mb + mb/2, 1 * mb, false},
		{"big heap, excess under an eighth", 50 * mb, 45 * mb, false},
		{"big heap, excess over an eighth", 60 * mb, 45 * mb, true},
		{"held at the memory limit after a burst", 96 * mb, 80 * mb, true},
		{"held below live (counters of two moments)", 5 * mb, 6 * mb, false},
	} {
		if got := shouldTrim(tc.held, tc.live); got != tc.want {
			t.Errorf("%s: shouldTrim(%d, %d) = %v, want %v", tc.name, tc.held, tc.live, got, tc.want)
		}
	}
}
