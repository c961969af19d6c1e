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

// median is the median of tool's figure f over its good runs at p.n.
func (p peerCols) median(tool string, f func(peers.Scale) (float64, bool)) (float64, bool) {
	if p.r == nil {
		return 0, false
	}
	var vals []float64
	for _, s := range p.r.Scale[tool][p.n] {
		if v, has := f(s); s.Ok() && has {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return 0, false
	}
	slices.Sort(vals)
	return vals[(len(vals)-1)/2], true
}

// floor formats the bench/peers go-floor at p.n: its start as timed like a
// supervisor's, and its loop's own time.
func (p peerCols) floor() string {
	up, ok := p.median("go-floor", func(s peers.Scale) (float64, bool) { return s.UpS, true })
	if !ok {
		return ""
	}
	loop, _ := p.median("go-floor", func(s peers.Scale) (float64, bool) { return s.Loop.Seconds, true })
	return fmt.Sprintf("go-floor there: all running %.2f s (its loop %.2f s)", up, loop)
}

// listCold is tool's cold listing at p.n, ms.
func (p peerCols) listCold(tool string) (float64, bool) {
	return p.median(tool, func(s peers.Scale) (float64, bool) { return s.ListCold.Median, s.ListCold.N > 0 })
}

// scale formats what of the scale benchmark: up, up_floor, pss, peak_pss,
// idle, list, list_cold or stop.
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
	floorUp, hasFloor := p.median("go-floor", func(s peers.Scale) (float64, bool) { return s.UpS, true })
	for _, tool := range tools {
		runs := p.r.Scale[tool][p.n]
		if len(runs) == 0 || (strings.HasPrefix(tool, "tend") && tool != "tend") || tool == "go-floor" {
			continue
		}
		if what == "up_floor" && !hasFloor {
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
			case "up_floor":
				vals = append(vals, s.UpS/floorUp)
			case "pss":
				vals = append(vals, s.PSSKB*1024)
			case "peak_pss":
				if s.PeakPSSKB > 0 {
					vals = append(vals, s.PeakPSSKB*1024)
				}
			case "idle":
				vals = append(vals, s.IdlePercent())
			case "list":
				vals = append(vals, s.List.Median)
			case "list_cold":
				if s.ListCold.N > 0 {
					vals = append(vals, s.ListCold.Median)
				}
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
			case "up_floor":
				c.text = fmt.Sprintf("%s %.1fx", tool, c.v)
			case "pss", "peak_pss":
				c.text = fmt.Sprintf("%s %s", tool, mib(c.v))
			case "idle":
				c.text = fmt.Sprintf("%s %s", tool, pct(c.v))
			case "list", "list_cold":
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
