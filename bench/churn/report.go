package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// report is the human summary of res, derived from the raw figures.
func report(res Results) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "bench/churn %s (tend %s, %s, %d CPUs, load %s → %s)\n\n", measure.Stamp(res.Started), res.Source.Describe,
		res.Machine.Kernel, res.Machine.CPUs, res.Machine.LoadStart, res.Machine.LoadEnd)
	if s := res.Soak; s != nil && len(s.Samples) > 0 {
		first, last := s.Samples[0], s.Samples[len(s.Samples)-1]
		warm := s.Samples[min(len(s.Samples)-1, len(s.Samples)/5)] // after a fifth of the run
		fmt.Fprintf(&b, "soak: %d programs added and removed (remove_on_exit, %d at a time) in %.0f s, %.0f a second; %d adds refused\n",
			s.Programs, s.Batch, s.Seconds, float64(s.Programs)/s.Seconds, s.Failed)
		fmt.Fprintf(&b, "  %-22s %12s %12s %12s %12s\n", "", "start", "after warm-up", "end", "max")
		row := func(name string, get func(Sample) float64, unit string) {
			mx := slices.MaxFunc(s.Samples, func(x, y Sample) int { return cmpF(get(x), get(y)) })
			fmt.Fprintf(&b, "  %-22s %12s %12s %12s %12s\n", name, f(get(first), unit), f(get(warm), unit), f(get(last), unit), f(get(mx), unit))
		}
		row("RSS", func(s Sample) float64 { return mib(s.RSS) }, "MiB")
		row("heap", func(s Sample) float64 { return mib(s.HeapAlloc) }, "MiB")
		row("descriptors", func(s Sample) float64 { return float64(s.FDs) }, "")
		row("goroutines", func(s Sample) float64 { return float64(s.Goroutines) }, "")
		row("audit", func(s Sample) float64 { return mib(s.Audit) }, "MiB")
		row("instances", func(s Sample) float64 { return float64(s.Instances) }, "")
		b.WriteString("  (the last sample is taken 3 s after the last batch, when the daemon has handed back what bursts took)\n\n")
	}
	if a := res.Add; a != nil && len(a.Running) > 0 {
		fmt.Fprintf(&b, "add → running over the API, daemon side (POST sent → spawned event's time), %d adds: p50 %s, p95 %s (target: p50 ≤ 5 ms)\n",
			len(a.Running), ms(pct(a.Running, 50)), ms(pct(a.Running, 95)))
		fmt.Fprintf(&b, "  POST /v1/programs answered: p50 %s, p95 %s\n\n", ms(pct(a.Answer, 50)), ms(pct(a.Answer, 95)))
	}
	if r := res.Run; r != nil && len(r.Tend) > 0 {
		t, fl := pct(r.Tend, 50), pct(r.Floor, 50)
		fmt.Fprintf(&b, "tend run --rm -a -- /bin/true, end to end, %d runs: p50 %s, p95 %s\n", len(r.Tend), ms(t), ms(pct(r.Tend, 95)))
		fmt.Fprintf(&b, "  floor (a Go program that forks and waits /bin/true, exec'd): p50 %s, p95 %s\n", ms(fl), ms(pct(r.Floor, 95)))
		fmt.Fprintf(&b, "  ratio of the medians: %.1f× (target: ≤ 3×)\n", float64(t)/float64(fl))
		if len(r.CLI) > 0 {
			fmt.Fprintf(&b, "  tend version exec'd (the CLI's own start, in the figure above): p50 %s\n", ms(pct(r.CLI, 50)))
		}
		b.WriteString("\n")
	}
	if p := res.PS; p != nil && len(p.PS) > 0 {
		fmt.Fprintf(&b, "tend ps at %d programs: p50 %s; tend ps -l session=s7 (%d of them): p50 %s (target: no more than tend ps)\n",
			p.Programs, ms(pct(p.PS, 50)), p.Programs/p.Sessions, ms(pct(p.PSLabel, 50)))
		fmt.Fprintf(&b, "/metrics at %d programs and %d remove_on_exit ones: %d series by default (%d tend_*), %d with ?instances=all (%d tend_*), %d with ?instances=none (%d tend_*)\n",
			p.Programs, p.Transient, p.Series.Default, p.Series.TendDefault, p.Series.All, p.Series.TendAll, p.Series.None, p.Series.TendNone)
	}
	for _, e := range res.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	return b.Bytes()
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func f(v float64, unit string) string {
	if unit == "" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func pct(ms []measure.Ms, p float64) time.Duration {
	ds := make([]time.Duration, len(ms))
	for i, m := range ms {
		ds[i] = m.D()
	}
	return measure.Percentile(ds, p)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// plot draws the soak's series as soak.svg, four panels over the programs
// added, and converts it to soak.png with rsvg-convert when it is there
// (Debian: apt-get install librsvg2-bin).
func plot(dir string, s *Soak) error {
	panels := []struct {
		title string
		get   func(Sample) float64
	}{
		{"daemon RSS (MiB)", func(s Sample) float64 { return mib(s.RSS) }},
		{"descriptors", func(s Sample) float64 { return float64(s.FDs) }},
		{"goroutines", func(s Sample) float64 { return float64(s.Goroutines) }},
		{"audit directory (MiB)", func(s Sample) float64 { return mib(s.Audit) }},
	}
	const w, h, pw, ph, left, top = 1040, 760, 420, 260, 70, 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16">tend churn soak: %d programs added and removed (remove_on_exit, %d at a time) in %.0f s</text>`+"\n", left, s.Programs, s.Batch, s.Seconds)
	xmax := float64(max(s.Samples[len(s.Samples)-1].Programs, 1))
	for i, p := range panels {
		x0 := left + (i%2)*(pw+90)
		y0 := top + (i/2)*(ph+90)
		ymax := 0.0
		for _, smp := range s.Samples {
			ymax = max(ymax, p.get(smp))
		}
		ymax = niceMax(ymax)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14">%s</text>`+"\n", x0, y0-8, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, pw, ph)
		for k := 0; k <= 4; k++ {
			y := y0 + ph - ph*k/4
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/><text x="%d" y="%d" text-anchor="end">%g</text>`+"\n",
				x0, y, x0+pw, y, x0-6, y+4, ymax*float64(k)/4)
			xv := xmax * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%.0f</text>`+"\n", x0+pw*k/4, y0+ph+16, xv)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">programs added</text>`+"\n", x0+pw/2, y0+ph+32)
		var pts []string
		for _, smp := range s.Samples {
			x := float64(x0) + float64(pw)*float64(smp.Programs)/xmax
			y := float64(y0+ph) - float64(ph)*p.get(smp)/ymax
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#1f6feb" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
	}
	b.WriteString("</svg>\n")
	svg := filepath.Join(dir, "soak.svg")
	if err := os.WriteFile(svg, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if _, err := exec.LookPath("rsvg-convert"); err != nil {
		fmt.Fprintln(os.Stderr, "churn: no rsvg-convert here (apt-get install librsvg2-bin): soak.svg only")
		return nil
	}
	if out, err := exec.Command("rsvg-convert", "-o", filepath.Join(dir, "soak.png"), svg).CombinedOutput(); err != nil {
		return fmt.Errorf("rsvg-convert soak.svg: %w\n%s", err, out)
	}
	return nil
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceMax(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := 1.0
	for p*10 < v {
		p *= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
