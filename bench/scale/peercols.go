package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tend-sh/tend/bench/internal/peers"
)

// peerCols formats the peers' figures at one N of a bench/peers run.
type peerCols struct {
	r *peers.Run
	n int
}

// scale formats what of the scale benchmark: up, pss, idle, list or stop.
func (p peerCols) scale(what string) string {
	if p.r == nil {
		return ""
	}
	type cell struct {
		name string
		v    float64
		text string
	}
	var cells []cell
	tools := slices.Sorted(maps.Keys(p.r.Scale))
	var tendThere string
	for _, tool := range tools {
		runs := p.r.Scale[tool][p.n]
		if len(runs) == 0 || tool == "tend-maxrss" {
			continue
		}
		var vals []float64
		why := ""
		for _, s := range runs {
			if !s.Ok() {
				why = cmp.Or(s.Error, s.Skipped)
				continue
			}
			switch what {
			case "up":
				vals = append(vals, s.UpS)
			case "pss":
				vals = append(vals, s.PSSKB*1024)
			case "idle":
				vals = append(vals, s.IdlePercent())
			case "list":
				vals = append(vals, s.List.Median)
			case "stop":
				vals = append(vals, s.StopS)
			}
		}
		c := cell{name: tool}
		if len(vals) == 0 {
			if why == "" {
				continue
			}
			c.v, c.text = 1e18, tool+": "+shortWhy(why)
		} else {
			slices.Sort(vals)
			c.v = vals[(len(vals)-1)/2]
			switch what {
			case "up", "stop":
				c.text = fmt.Sprintf("%s %.1f s", tool, c.v)
			case "pss":
				c.text = fmt.Sprintf("%s %s", tool, mib(c.v))
			case "idle":
				c.text = fmt.Sprintf("%s %s", tool, pct(c.v))
			case "list":
				c.text = fmt.Sprintf("%s %.0f ms", tool, c.v)
			}
		}
		if tool == "tend" {
			tendThere = c.text
			continue
		}
		cells = append(cells, c)
	}
	slices.SortStableFunc(cells, func(a, b cell) int { return cmp.Compare(a.v, b.v) })
	var parts []string
	for _, c := range cells {
		parts = append(parts, c.text)
	}
	s := strings.Join(parts, ", ")
	if tendThere != "" {
		s += "; " + strings.Replace(tendThere, "tend ", "tend there ", 1)
	}
	return s
}

// shortWhy is a peer's failure in a table cell.
func shortWhy(why string) string {
	if strings.Contains(why, "did not finish in 10 min") {
		return "did not finish in 10 min"
	}
	if len(why) > 60 {
		return why[:60] + "…"
	}
	return why
}

// cli formats the peers' one CLI call (bench/peers §1), ms.
func (p peerCols) cli() string {
	if p.r == nil || len(p.r.Latency) == 0 {
		return ""
	}
	var parts []string
	names := peers.Peers(p.r.Latency)
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Compare(p.r.Latency[a].CLICall.Median, p.r.Latency[b].CLICall.Median)
	})
	for _, n := range names {
		if l := p.r.Latency[n]; l.Skipped == "" && l.CLICall.N > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", n, l.CLICall.Median))
		}
	}
	s := strings.Join(parts, ", ")
	if l, ok := p.r.Latency["tend"]; ok && l.CLICall.N > 0 {
		s += fmt.Sprintf("; tend there %.1f", l.CLICall.Median)
	}
	return s + " ms (one CLI call, §1)"
}

// fastestCLI is the fastest peer's one CLI call, ms.
func (p peerCols) fastestCLI() (float64, bool) {
	if p.r == nil {
		return 0, false
	}
	best, ok := 0.0, false
	for _, n := range peers.Peers(p.r.Latency) {
		if l := p.r.Latency[n]; l.Skipped == "" && l.CLICall.N > 0 && (!ok || l.CLICall.Median < best) {
			best, ok = l.CLICall.Median, true
		}
	}
	return best, ok
}
