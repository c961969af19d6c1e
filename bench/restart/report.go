package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
	"github.com/tend-sh/tend/internal/program"
)

// Targets of the restart mechanism (issues 2, 10 and 12).
const (
	targetRestartsPerSec = 200.0
	targetRatio          = 0.5
	targetCPUPerRestart  = 2.0 // ms
	targetExitedP50      = 1 * time.Millisecond
	targetExitedP99      = 5 * time.Millisecond
	targetReplacedP50    = 3 * time.Millisecond // zero backoff and, issue 12, the default config
	targetPlacement      = 200 * time.Microsecond
)

// printReport writes the table of one run, or of several (each figure then
// min–max over them), and the notes that qualify it. pr, if not nil, is a
// bench/peers run whose figures fill the last column.
func printReport(w io.Writer, runs []Results, pr *peers.Run) {
	fmt.Fprintf(w, "tend restart mechanism, in-process: the daemon's packages (reaper, Managers, broker, audit log, capture, runs.json, notify sockets, cgroups)\n")
	for _, r := range runs {
		m := r.Machine
		fmt.Fprintf(w, "run %s: tend %s; %s, kernel %s, %d CPUs, load %s -> %s\n", r.Stamp, cmp.Or(r.Tend.Describe, "?"), m.Go, m.Kernel, m.CPUs, m.LoadStart, m.LoadEnd)
		if m.WorkDir != "" {
			fmt.Fprintf(w, "  state directories in %s\n", m.WorkDir)
		}
	}
	if len(runs) == 0 {
		return
	}
	s := runs[0].Settings
	fmt.Fprintf(w, "settings: window %v; %d kills per variant with zero backoff, %d with the default config (runs %v old, then their replacements %v or %v old), %v at rest before each\n",
		s.Duration.D(), s.Kills, s.DefaultKills, s.Age.D(), s.AgeElapsed.D(), s.AgeWaiting.D(), s.Gap.D())
	if pr != nil {
		fmt.Fprintf(w, "peers: %s (%s); each section's figures are medians there\n", pr.Cite(), pr.Dir)
	} else {
		fmt.Fprintf(w, "peers: none given (-peers bench/peers/results/STAMP of the same session); see bench/peers/RESULTS.md of its run\n")
	}
	if len(runs) > 1 {
		fmt.Fprintf(w, "each figure is min – max over the %d runs; a verdict counts the runs that met the target\n", len(runs))
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// tend's default mode (cgroups, where a hierarchy is writable, as here)
	// first, which the verdicts judge; without cgroups beside it.
	def, other := program.TrackingCgroup, program.TrackingGroup
	if !slices.ContainsFunc(runs, func(r Results) bool { return r.Cgroup.Dir != "" }) {
		def = program.TrackingGroup
	}
	if def == program.TrackingGroup {
		other = ""
		fmt.Fprintf(tw, "measure\ttend (%s)\twith cgroups: not measured\ttarget\tverdict\tpeers\n", def)
	} else {
		fmt.Fprintf(tw, "measure\ttend, default (%s)\twithout cgroups (%s)\ttarget\tverdict\tpeers\n", def, other)
	}
	t := table{measure.Table[Results]{W: tw, Runs: runs, Two: true}}
	pc := peerCols{pr}
	crash := func(tr string, f func(Crash, Results) float64) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			for _, c := range r.Crash {
				if c.Tracking == tr {
					return f(c, r), true
				}
			}
			return 0, false
		}
	}
	both := func(name string, get func(string) func(Results) (float64, bool), f func(float64) string, target string, pass func(float64) bool, peers string) {
		var o func(Results) (float64, bool)
		if other != "" {
			o = get(other)
		}
		t.Row2(name, get(def), o, f, target, pass, peers)
	}
	t.row("baseline fork+exec+wait /bin/true", func(r Results) (float64, bool) { return r.Baseline.rate(), r.Baseline.Spawns > 0 },
		perSec, "", nil, pc.floorSpawn())
	both("crash loop restarts, zero backoff", func(tr string) func(Results) (float64, bool) {
		return crash(tr, func(c Crash, _ Results) float64 { return c.rate() })
	}, perSec, fmt.Sprintf(">= %.0f/s", targetRestartsPerSec), func(v float64) bool { return v >= targetRestartsPerSec }, pc.crash(false))
	both("crash loop / baseline", func(tr string) func(Results) (float64, bool) {
		return crash(tr, func(c Crash, r Results) float64 { return c.rate() / r.Baseline.rate() })
	}, func(v float64) string { return fmt.Sprintf("%.2f", v) }, fmt.Sprintf(">= %.2f", targetRatio), func(v float64) bool { return v >= targetRatio }, pc.crashRatio())
	both("daemon CPU per restart", func(tr string) func(Results) (float64, bool) {
		return crash(tr, func(c Crash, _ Results) float64 { return c.cpuPerRestart() })
	}, msf, "<= "+msf(targetCPUPerRestart), func(v float64) bool { return v <= targetCPUPerRestart }, pc.crash(true))
	lats := func(cfg string, spawned bool, p float64) func(string) func(Results) (float64, bool) {
		return func(tr string) func(Results) (float64, bool) {
			return func(r Results) (float64, bool) { l := lat(r, cfg, tr); return pct(l, spawned, p), l != nil }
		}
	}
	both("kill -> exited event, p50 (zero backoff)", lats(configZero, false, 50), msf, "<= "+msd(targetExitedP50), under(targetExitedP50), pc.waitFloor())
	both("  p95", lats(configZero, false, 95), msf, "", nil, "")
	both("  p99", lats(configZero, false, 99), msf, "<= "+msd(targetExitedP99), under(targetExitedP99), "")
	both("kill -> replacement exec'd, p50 (zero backoff)", lats(configZero, true, 50), msf, "<= "+msd(targetReplacedP50), under(targetReplacedP50), pc.exec(false))
	both("  p95", lats(configZero, true, 95), msf, "", nil, pc.exec(true))
	both("  p99", lats(configZero, true, 99), msf, "", nil, "")
	if other != "" {
		t.row("cgroup placement adds, p50 (zero backoff)", added(configZero), msf, "<= "+msd(targetPlacement), under(targetPlacement), "")
	}
	both("default config, first crash: kill -> replacement exec'd, p50", lats(configDefault, true, 50), msf, "<= "+msd(targetReplacedP50), under(targetReplacedP50), "")
	both("  p95", lats(configDefault, true, 95), msf, "", nil, "")
	both("  p99", lats(configDefault, true, 99), msf, "", nil, "")
	if other != "" {
		t.row("  cgroup placement adds, p50", added(configDefault), msf, "<= "+msd(targetPlacement), under(targetPlacement), "")
	}
	both("default config, repeated crash, backoff elapsed: kill -> exec'd, p50", lats(configRepeatElapsed, true, 50), msf,
		"<= "+msd(targetReplacedP50), under(targetReplacedP50), "")
	both("  p95", lats(configRepeatElapsed, true, 95), msf, "", nil, "")
	both("default config, repeated crash, backoff ahead: kill -> exec'd, p50", lats(configRepeatWaiting, true, 50), msf, "", nil, "")
	both("  the backoff's announced wait, p50", func(tr string) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			l := lat(r, configRepeatWaiting, tr)
			return ms(measure.Percentile(backoffs(l), 50).D()), l != nil
		}
	}, msf, "", nil, "")
	both("  kill -> exec'd past that wait, p50", func(tr string) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			l := lat(r, configRepeatWaiting, tr)
			return ms(measure.Percentile(pastBackoff(l), 50).D()), l != nil
		}
	}, msf, "", nil, "")
	tw.Flush()
	writeDetails(w, runs)
}

// added is what cgroup placement adds to kill -> exec'd, p50, in config.
func added(config string) func(Results) (float64, bool) {
	return func(r Results) (float64, bool) {
		g, c := lat(r, config, program.TrackingGroup), lat(r, config, program.TrackingCgroup)
		return pct(c, true, 50) - pct(g, true, 50), g != nil && c != nil
	}
}

// backoffs are the waits l's backoff events announced.
func backoffs(l *Latency) []measure.Ms {
	if l == nil {
		return nil
	}
	return l.Backoffs
}

// pastBackoff is each of l's kill -> exec'd less the wait its backoff
// event announced: how late the replacement came after the backoff ended.
func pastBackoff(l *Latency) []measure.Ms {
	if l == nil {
		return nil
	}
	var out []measure.Ms
	for i, s := range l.Spawned {
		if i < len(l.Backoffs) {
			out = append(out, s-l.Backoffs[i])
		}
	}
	return out
}

// table is the report's table with what only this report needs.
type table struct {
	measure.Table[Results]
}

func (t table) row(name string, get func(Results) (float64, bool), f func(float64) string, target string, pass func(float64) bool, peers string) {
	t.Row(name, get, f, target, pass, peers)
}

// lat is the latency variant of r, or nil.
func lat(r Results, config, tracking string) *Latency {
	for i := range r.Latency {
		if l := &r.Latency[i]; l.Config == config && l.Tracking == tracking && len(l.Spawned) > 0 {
			return l
		}
	}
	return nil
}

// pct is a percentile of l's spawned (or exited) samples, in ms.
func pct(l *Latency, spawned bool, p float64) float64 {
	if l == nil {
		return 0
	}
	s := l.Exited
	if spawned {
		s = l.Spawned
	}
	return ms(measure.Percentile(s, p).D())
}

func under(target time.Duration) func(float64) bool {
	return func(v float64) bool { return v <= ms(target) }
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msf(v float64) string { return fmt.Sprintf("%.2f ms", v) }

func msd(d time.Duration) string { return msf(ms(d)) }

func perSec(v float64) string { return fmt.Sprintf("%.0f/s", v) }

// peerCols formats the peers' figures of the bench/peers run, if any.
type peerCols struct{ r *peers.Run }

// list formats the tools' values, lowest first, and tend's own in the
// same run after a semicolon.
func list(vals map[string]float64, tend float64, hasTend bool, f func(float64) string, sect string) string {
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(vals[a], vals[b]) })
	var parts []string
	for _, n := range names {
		parts = append(parts, n+" "+f(vals[n]))
	}
	s := strings.Join(parts, ", ")
	if hasTend {
		s += "; tend there " + f(tend)
	}
	return s + " (" + sect + ")"
}

func (p peerCols) exec(p95 bool) string {
	if p.r == nil || len(p.r.Latency) == 0 {
		return ""
	}
	get := func(l peers.Latency) float64 {
		if p95 {
			return l.Exec.P95
		}
		return l.Exec.Median
	}
	vals := map[string]float64{}
	for _, n := range peers.Peers(p.r.Latency) {
		if l := p.r.Latency[n]; l.Skipped == "" && l.Exec.N > 0 {
			vals[n] = get(l)
		}
	}
	t, ok := p.r.Latency["tend"]
	return list(vals, get(t), ok && t.Exec.N > 0, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "§1, ms")
}

func (p peerCols) crash(cpu bool) string {
	if p.r == nil || len(p.r.Crash) == 0 {
		return ""
	}
	get := func(c peers.Crash) float64 {
		if cpu {
			return c.CPUPerRestart.Median
		}
		return c.Rate.Median
	}
	f := func(v float64) string { return fmt.Sprintf("%.1f/s", v) }
	sect := "§2"
	if cpu {
		f, sect = func(v float64) string { return fmt.Sprintf("%.2f", v) }, "§2, ms"
	}
	vals := map[string]float64{}
	for _, n := range peers.Peers(p.r.Crash) {
		if c := p.r.Crash[n]; c.Skipped == "" && c.Rate.N > 0 {
			vals[n] = get(c)
		}
	}
	t, ok := p.r.Crash["tend"]
	return list(vals, get(t), ok && t.Rate.N > 0, f, sect)
}

// crashRatio is the best peer's crash-loop rate over that run's Go floor.
func (p peerCols) crashRatio() string {
	if p.r == nil {
		return ""
	}
	floor, ok := p.r.FloorMedian("go", "spawn-forkexec", 1, true)
	if !ok {
		return ""
	}
	best, bestName := 0.0, ""
	for _, n := range peers.Peers(p.r.Crash) {
		if c := p.r.Crash[n]; c.Skipped == "" && c.Rate.Median > best {
			best, bestName = c.Rate.Median, n
		}
	}
	if bestName == "" {
		return ""
	}
	return fmt.Sprintf("%s %.1f / Go floor %.0f = %.2f (§2, §4)", bestName, best, floor, best/floor)
}

func (p peerCols) floorSpawn() string {
	if p.r == nil {
		return ""
	}
	g, ok1 := p.r.FloorMedian("go", "spawn-forkexec", 1, true)
	c, ok2 := p.r.FloorMedian("c", "fork", 1, true)
	if !ok1 && !ok2 {
		return ""
	}
	return fmt.Sprintf("Go ForkExec+Wait4 %.0f/s, C fork+exec %.0f/s (§4)", g, c)
}

func (p peerCols) waitFloor() string {
	if p.r == nil {
		return ""
	}
	us, ok := p.r.FloorMedian("go", "killwait-wait4", 0, false)
	if !ok {
		return ""
	}
	return fmt.Sprintf("floor: a Go wait4 wakes %.2f ms after the kill (§4)", us/1000)
}

// writeDetails prints what qualifies the table.
func writeDetails(w io.Writer, runs []Results) {
	fmt.Fprintf(w, "\nDetails:\n")
	for _, r := range runs {
		fmt.Fprintf(w, "- run %s:", r.Stamp)
		for _, c := range r.Crash {
			per := 0.0
			if c.Restarts > 0 {
				per = float64(c.Events) / float64(c.Restarts)
			}
			fmt.Fprintf(w, " crash loop (%s) %d restarts in %v, %.1f events per restart, other load %s CPUs;",
				c.Tracking, c.Restarts, c.Elapsed.D().Round(time.Millisecond), per, cpus(c.Others))
		}
		for _, l := range r.Latency {
			fmt.Fprintf(w, " %s/%s %d kills, other load %s;", l.Config, l.Tracking, len(l.Spawned), cpus(l.Others))
			if len(l.Ages) > 0 {
				fmt.Fprintf(w, " ages %v-%v;", slices.Min(l.Ages).D().Round(time.Millisecond), slices.Max(l.Ages).D().Round(time.Millisecond))
			}
		}
		if r.Cgroup.Dir != "" {
			fmt.Fprintf(w, " cgroups in %s (controllers: %s)", r.Cgroup.Dir, cmp.Or(strings.Join(r.Cgroup.Controllers, " "), "none"))
		} else {
			fmt.Fprintf(w, " no cgroup variants: %s", r.Cgroup.NotMeasured)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "- default config: %s.\n", runs[0].Settings.Defaults)
	fmt.Fprint(w, `Notes:
- kill -> exited includes the kernel's teardown of the killed process: it is
  an upper bound of exit -> event (bench/peers §1 times kill -> exit alone).
- Event times are taken when Publish returns: numbered, appended to the audit
  file and fanned out. The spawned event follows ForkExec, which returns only
  once the replacement has exec'd, so it bounds "exec'd" from above.
- Default config: every key at its default (backoff_initial 1s, doubling per
  crash, jitter 0.1). The backoff counts from the run's start, so a run older
  than its backoff that is killed is replaced at once. Each sample is a fresh
  program killed once its run is older than backoff_initial (its first crash:
  crash_count 0 before it, as for a long-running worker whose count
  stable_run_reset has reset), then its replacement killed too (its second
  crash, backoff 1.8-2 s from that run's start): older than 2 s in half the
  samples (replaced at once), younger in the other half, where the replacement
  waits out what is left of it, as the backoff event announces: that row is
  the backoff, not the mechanism; "past that wait" is the mechanism's share.
- The columns: tend's default mode first (cgroups here; the verdicts judge
  it), without cgroups beside it. The crash loop runs with zero backoff: with
  the defaults it would wait 1 s, 2 s, 4 s ... up to 60 s between starts.
- Variants of one config alternate kill by kill (cgroup and not), so both see
  the same machine; "placement adds" is the difference of their p50s.
  Cgroup variants run in an explicit directory (daemon.cgroup = DIR), so the
  benchmark process is not moved; the runs' path is the same as with "auto".
- Peers' exec'd column is a kernel exec timestamp; runit and s6 pay one extra
  /bin/sh exec there. CPU per restart excludes children (RUSAGE_SELF).
- Process creation speed varies with the VM's load: compare ratios to the
  baseline of the same run rather than raw rates across runs.
`)
}

// cpus formats a count of busy CPUs; negative means unknown.
func cpus(n float64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", n)
}
