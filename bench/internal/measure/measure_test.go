package measure

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond // reversed: Percentile sorts
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile[time.Duration](nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestMsRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 1234567 * time.Nanosecond, 3 * time.Second, 999 * time.Nanosecond} {
		m := NewMs(d)
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Ms
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if back != m || m.D()-d > time.Microsecond || d-m.D() > time.Microsecond {
			t.Errorf("%v -> %s -> %v", d, b, back.D())
		}
	}
}

func TestSpanVerdict(t *testing.T) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	if got := Span([]float64{3, 1, 2}, f); got != "1.0 – 3.0" {
		t.Errorf("Span = %q", got)
	}
	if got := Span([]float64{2}, f); got != "2.0" {
		t.Errorf("Span of one = %q", got)
	}
	if got := Verdict([]bool{true, false, true}); got != "2/3 PASS" {
		t.Errorf("Verdict = %q", got)
	}
}

func TestWorkDirNamesTheFilesystem(t *testing.T) {
	dir := t.TempDir()
	got := WorkDir(dir)
	if !strings.HasPrefix(got, dir+": ") || strings.HasPrefix(got, dir+":  on") || strings.HasSuffix(got, ": ?") {
		t.Fatalf("WorkDir(%s) = %q: want the directory, its filesystem type and source", dir, got)
	}
}
