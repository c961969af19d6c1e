package measure

import (
	"os"
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

func TestTableTwoModes(t *testing.T) {
	var b strings.Builder
	tb := Table[float64]{W: &b, Runs: []float64{1, 2}, Two: true}
	get := func(r float64) (float64, bool) { return r, true }
	other := func(r float64) (float64, bool) { return 10 * r, true }
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	tb.Row2("m", get, other, f, "<= 1", func(v float64) bool { return v <= 1 }, "p")
	tb.Row("n", get, f, "", nil, "")
	tb.Line("l", "text")
	want := "m\t1 – 2\t10 – 20\t<= 1\t1/2 PASS\tp\n" +
		"n\t1 – 2\t\t\t\t\n" +
		"l\ttext\t\t\t\t\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestWatchMemSeesThisProcess(t *testing.T) {
	w := WatchMem(os.Getpid(), 5*time.Millisecond, "one")
	time.Sleep(30 * time.Millisecond)
	w.Phase("two")
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1 // touched: resident
	}
	time.Sleep(30 * time.Millisecond)
	p := w.Stop()
	if p.Samples < 2 || p.PSS <= 0 || p.RSS < p.PSS/2 || p.HighWater < p.RSS/2 {
		t.Fatalf("peak %+v: want samples, PSS, RSS and a high-water mark", p)
	}
	if p.RSSPhase != "two" || p.RSS < 64<<20 {
		t.Errorf("peak %+v: want the 64 MiB of phase two", p)
	}
	_ = ballast[len(ballast)-1]
}
