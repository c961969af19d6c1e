package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// render is the report of r: each figure beside its target from issue 30.
func render(r *Results) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "bench/acp %s, %s (%s), %d CPUs, load %s → %s\n\n", r.Stamp, r.Source.Describe, r.Machine.Kernel, r.Machine.CPUs, r.Machine.LoadStart, r.Machine.LoadEnd)
	ms := func(d measure.Ms) string { return fmt.Sprintf("%.2f ms", float64(d.D())/float64(time.Millisecond)) }
	pct := func(s []measure.Ms, p float64) measure.Ms { return measure.Percentile(s, p) }
	if p := r.Prompt; p != nil {
		fmt.Fprintf(&b, "prompt (%d on each side, alternating)        tend        direct      target\n", len(p.TendEnd))
		for _, row := range []struct {
			name       string
			tend, dir  []measure.Ms
			percentile float64
		}{
			{"first chunk p50", p.TendFirst, p.DirectFirst, 50}, {"first chunk p95", p.TendFirst, p.DirectFirst, 95},
			{"end_turn p50", p.TendEnd, p.DirectEnd, 50}, {"end_turn p95", p.TendEnd, p.DirectEnd, 95},
		} {
			t, d := pct(row.tend, row.percentile), pct(row.dir, row.percentile)
			ok := "met"
			if t.D() > d.D()+2*time.Millisecond {
				ok = "MISSED"
			}
			fmt.Fprintf(&b, "  %-40s %-11s %-11s ≤ direct + 2 ms: %s\n", row.name, ms(t), ms(d), ok)
		}
		b.WriteString("\n")
	}
	if s := r.Streams; s != nil {
		mb := float64(r.Stream) / (1 << 20)
		tr, dr := mb/s.Tend.D().Seconds(), mb/s.Direct.D().Seconds()
		ok := "met"
		if tr < 0.8*dr {
			ok = "MISSED"
		}
		perMB := func(d measure.Ms) string { return fmt.Sprintf("%.1f", float64(d.D())/float64(time.Millisecond)/mb) }
		fmt.Fprintf(&b, "stream (%.0f MB answer)\n  tend   %s, %.1f MB/s (%d bytes of text)\n  direct %s, %.1f MB/s (%d bytes)\n  ratio %.2f (target ≥ 0.8: %s); daemon CPU %s, %s ms per MB\n",
			mb, ms(s.Tend), tr, s.TendBytes, ms(s.Direct), dr, s.DirectBytes, tr/dr, ok, ms(s.DaemonCPU), perMB(s.DaemonCPU))
		fmt.Fprintf(&b, "  CPU per MB (ms)  agent  daemon  client\n  tend             %5s  %6s  %6s\n  direct           %5s  %6s  %6s\n\n",
			perMB(s.TendAgentCPU), perMB(s.DaemonCPU), perMB(s.TendClientCPU), perMB(s.DirectAgentCPU), "-", perMB(s.DirectClientCPU))
	}
	if i := r.Idle; i != nil && r.N > 0 {
		per := float64(i.PSSPeak-i.PSSBefore) / float64(r.N) / 1024
		fmt.Fprintf(&b, "idle (%d ACP agents)\n  daemon PSS %.1f MiB before, %.1f MiB at peak, %.1f MiB at rest: %.1f KiB per agent at peak\n  idle CPU %s over %s\n",
			r.N, mib(i.PSSBefore), mib(i.PSSPeak), mib(i.PSSAfter), per, ms(i.IdleCPU), i.IdleWindow.D())
		st, ev := pct(i.ToStatus, 50), pct(i.ToEvent, 50)
		ok := "met"
		if st.D() > 5*time.Millisecond || ev.D() > 5*time.Millisecond {
			ok = "MISSED"
		}
		fmt.Fprintf(&b, "  permission request → tend status p50 %s, → event stream p50 %s (%d requests; target ≤ 5 ms: %s)\n",
			ms(st), ms(ev), len(i.ToStatus), ok)
	}
	return b.Bytes()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
