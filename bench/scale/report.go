package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/bench/internal/peers"
	"github.com/tend-sh/tend/internal/program"
)

// targets of a plain fleet of one size; a zero field has no target. The
// listings are judged cold and the memory at its peak, as a user meets
// them (issue 22).
type targets struct {
	up        time.Duration
	upFloor   float64 // start -> all running over the Go loop's time for as many sleeps
	pss       int64   // bytes, peak
	idlePct   float64
	statusP50 time.Duration // GET /v1/status, cold median
	ps        time.Duration // tend ps, cold median
	psPeer    string        // and no slower than this peer's cold listing in the bench/peers run
	down      time.Duration
	overHello time.Duration // tend status ID over a Go hello world, medians of the same run
}

// targetsAt are the targets of the plain fleets: at 1,000 (issues 4, 6
// and 22), at 10,000 (issues 12 and 22).
var targetsAt = map[int]targets{
	1000: {up: 4 * time.Second, pss: 25 << 20, idlePct: 0.03, statusP50: 10 * time.Millisecond, ps: 25 * time.Millisecond,
		psPeer: "runit", down: 3 * time.Second, overHello: time.Millisecond},
	10000: {up: 12 * time.Second, upFloor: 2, pss: 120 << 20, idlePct: 0.05, statusP50: 60 * time.Millisecond,
		ps: 100 * time.Millisecond, down: 5 * time.Second, overHello: time.Millisecond},
}

// Targets of the other daemons.
const (
	targetWatchedPct     = 1.5 // % of a core, max_rss on 1,000 by tree sampling (issue 6)
	targetWatchedCgroup  = 0.3 // % of a core, max_rss on 1,000 by memory.current (issue 10)
	targetAgentsPct      = 0.5 // % of a core, 1,000 idle agents (issue 12)
	targetLoad10k        = 300 * time.Millisecond
	targetFanoutAdded    = 1 * time.Millisecond
	targetNotifyP50      = 1 * time.Millisecond
	targetLoadInstances  = 10000
	targetWatchedAtCount = 1000
)

// printReport writes the tables of one run, or of several (each figure
// then min–max over them), and the details that qualify them. pr, if not
// nil, is a bench/peers run whose figures fill the peers' columns.
func printReport(w io.Writer, runs []Results, pr *peers.Run) {
	fmt.Fprintf(w, "tend daemon at scale: tend up as its own process, every instance sleep 100000\n")
	for _, r := range runs {
		m := r.Machine
		fmt.Fprintf(w, "run %s: tend %s (%s); %s, kernel %s, %d CPUs, descriptors %d/%d, load %s -> %s\n",
			r.Stamp, cmp.Or(r.Tend.Describe, "?"), r.Tend.BuiltFrom, m.Go, m.Kernel, m.CPUs, m.NofileSoft, m.NofileHard, m.LoadStart, m.LoadEnd)
		if m.WorkDir != "" {
			fmt.Fprintf(w, "  state directories in %s\n", m.WorkDir)
		}
	}
	if len(runs) == 0 {
		return
	}
	s := runs[0].Settings
	fmt.Fprintf(w, "settings: idle windows %v after %v; %d cold listings and tend ps (each after %v without a request), then %d warm listings, %d execs of each CLI command; memory sampled every %v from tend up to tend down; a start gaining nothing for %v has stalled\n",
		s.Idle.D(), s.Settle.D(), s.Cold, s.ColdGap.D(), s.Requests, s.CLIRuns, s.MemEvery.D(), s.Stall.D())
	if pr != nil {
		fmt.Fprintf(w, "peers: %s (%s)\n", pr.Cite(), pr.Dir)
	} else {
		fmt.Fprintf(w, "peers: none given (-peers bench/peers/results/STAMP of the same session); see bench/peers/RESULTS.md of its run\n")
	}
	if len(runs) > 1 {
		fmt.Fprintf(w, "each figure is min – max over the %d runs; a verdict counts the runs that met the target\n", len(runs))
	}

	var ns []int
	for _, r := range runs {
		for _, f := range plain(r, labelPlain) {
			if !slices.Contains(ns, f.N) {
				ns = append(ns, f.N)
			}
		}
	}
	slices.Sort(ns)
	for _, n := range ns {
		fmt.Fprintln(w)
		plainTable(w, runs, n, pr)
	}
	fmt.Fprintln(w)
	otherTable(w, runs)
	writeDetails(w, runs)
}

// plainTable is the table of the plain fleets of n instances: tend's
// default mode, which the verdicts judge, and cgroups off beside it.
func plainTable(w io.Writer, runs []Results, n int, pr *peers.Run) {
	tg := targetsAt[n]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fleetOf := func(label string) func(Results) (Fleet, bool) {
		return func(r Results) (Fleet, bool) {
			for _, f := range plain(r, label) {
				if f.N == n {
					return f, true
				}
			}
			return Fleet{}, false
		}
	}
	get, getOff := fleetOf(labelPlain), fleetOf(labelPlainOff)
	shape, mode, offMode := "", "default", "cgroup off"
	if f, ok := get(runs[0]); ok {
		shape = fmt.Sprintf(" (%d programs x %d)", f.Programs, f.Instances)
		mode = fmt.Sprintf("tend, default (%s)", cmp.Or(f.Tracking, "?"))
	}
	if f, ok := getOff(runs[0]); ok {
		offMode = fmt.Sprintf("cgroup off (%s)", cmp.Or(f.Tracking, "?"))
	}
	peerHead := ""
	if pr != nil {
		peerHead = fmt.Sprintf("peers at N=%d", n)
	}
	fmt.Fprintf(tw, "N = %d%s\t%s\t%s\ttarget\tverdict\t%s\n", n, shape, mode, offMode, peerHead)
	t := measure.Table[Results]{W: tw, Runs: runs, Two: true}
	pc := peerCols{pr, n}
	var short []string
	for _, r := range runs {
		for _, g := range []func(Results) (Fleet, bool){get, getOff} {
			if f, ok := g(r); ok && f.Error != "" {
				short = append(short, fmt.Sprintf("run %s, %s, stopped short: %s", r.Stamp, f.Label, f.Error))
			}
		}
	}
	defer func() {
		tw.Flush()
		for _, s := range short {
			fmt.Fprintln(w, s)
		}
	}()
	// ok: a figure of a fleet that ran whole; anyRun: of any fleet.
	ok := func(g func(Results) (Fleet, bool), f func(Fleet) float64) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			fl, has := g(r)
			return f(fl), has && fl.Error == ""
		}
	}
	anyRun := func(g func(Results) (Fleet, bool), f func(Fleet) float64) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) { fl, has := g(r); return f(fl), has }
	}
	both := func(name string, f func(Fleet) float64, whole bool, format func(float64) string, target string, pass func(float64) bool, peers string) {
		pick := anyRun
		if whole {
			pick = ok
		}
		t.Row2(name, pick(get, f), pick(getOff, f), format, target, pass, peers)
	}
	target := func(set bool, s string) string {
		if !set {
			return ""
		}
		return s
	}
	judge := func(set bool, f func(float64) bool) func(float64) bool {
		if !set {
			return nil
		}
		return f
	}
	if len(short) > 0 {
		both("instances running", func(f Fleet) float64 { return float64(f.Running) }, false, count,
			fmt.Sprint(n), func(v float64) bool { return int(v) == n }, "")
	}
	both("start -> all running", func(f Fleet) float64 { return f.AllRunning.D().Seconds() }, true, secs,
		target(tg.up > 0, "<= "+secs(tg.up.Seconds())), judge(tg.up > 0, func(v float64) bool { return v <= tg.up.Seconds() }), pc.scale("up"))
	hasFloor := func(r Results) (Floor, bool) {
		f, has := get(r)
		if !has || f.Floor == nil || f.Floor.Error != "" || f.Floor.Started != n {
			return Floor{}, false
		}
		return *f.Floor, true
	}
	t.Row("Go loop starting as many sleeps, a pipe each", func(r Results) (float64, bool) {
		fl, has := hasFloor(r)
		return fl.Took.D().Seconds(), has
	}, secs, "", nil, pc.floor())
	overFloor := func(g func(Results) (Fleet, bool)) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			f, has := g(r)
			fl, hasF := hasFloor(r)
			return f.AllRunning.D().Seconds() / fl.Took.D().Seconds(), has && hasF && f.Error == "" && fl.Took > 0
		}
	}
	t.Row2("  start -> all running / that loop", overFloor(get), overFloor(getOff), ratio,
		target(tg.upFloor > 0, fmt.Sprintf("<= %.1fx", tg.upFloor)), judge(tg.upFloor > 0, func(v float64) bool { return v <= tg.upFloor }), pc.scale("up_floor"))
	both("spawn_failed", func(f Fleet) float64 { return float64(f.Failed) }, false, count, "0", func(v float64) bool { return v == 0 }, "")
	both("daemon PSS, peak (tend up to tend down)", func(f Fleet) float64 { return float64(f.Peak.PSS) }, false, mib,
		target(tg.pss > 0, "<= "+mib(float64(tg.pss))), judge(tg.pss > 0, func(v float64) bool { return v <= float64(tg.pss) }), pc.scale("peak_pss"))
	both("daemon PSS at rest (after the idle window)", func(f Fleet) float64 { return float64(f.Mem.PSS) }, false, mib, "", nil, pc.scale("pss"))
	both("daemon RSS, peak", func(f Fleet) float64 { return float64(f.Peak.RSS) }, false, mib, "", nil, "")
	both("descriptors per running instance", func(f Fleet) float64 { return float64(f.Mem.FDs) / float64(max(f.Running, 1)) }, false,
		func(v float64) string { return fmt.Sprintf("%.2f", v) }, "", nil, "")
	both("largest descriptor table", func(f Fleet) float64 { return float64(f.Mem.FDLargest) }, false, count, "", nil, "")
	both("idle CPU, no watchdog", func(f Fleet) float64 { return f.Idle.percent() }, true, pct,
		target(tg.idlePct > 0, "<= "+pct(tg.idlePct)), judge(tg.idlePct > 0, func(v float64) bool { return v <= tg.idlePct }), pc.scale("idle"))
	both("GET /v1/status (all), cold, median", func(f Fleet) float64 { return pctl(f.StatusCold, 50) }, true, msf,
		target(tg.statusP50 > 0, "<= "+msd(tg.statusP50)), judge(tg.statusP50 > 0, under(tg.statusP50)), "")
	both("  warm, p50", func(f Fleet) float64 { return pctl(f.StatusRaw, 50) }, true, msf, "", nil, "")
	both("  warm, p95", func(f Fleet) float64 { return pctl(f.StatusRaw, 95) }, true, msf, "", nil, "")
	both("  warm + Go client decode, p50", func(f Fleet) float64 { return pctl(f.Status, 50) }, true, msf, "", nil, "")
	psTarget, psPass := tg.ps, tg.ps > 0
	psName := "<= " + msd(tg.ps)
	if v, has := pc.listCold(tg.psPeer); has && time.Duration(v*float64(time.Millisecond)) < psTarget {
		psTarget, psName = time.Duration(v*float64(time.Millisecond)), fmt.Sprintf("<= %s (%s's, cold)", msf(v), tg.psPeer)
	}
	both("tend ps, cold, median", func(f Fleet) float64 { return pctl(f.PSCold, 50) }, true, msf,
		target(psPass, psName), judge(psPass, under(psTarget)), pc.scale("list_cold"))
	both("  warm, median", func(f Fleet) float64 { return pctl(f.PS, 50) }, true, msf, "", nil, pc.scale("list"))
	both("tend status ID, median", func(f Fleet) float64 { return pctl(f.StatusCLI, 50) }, true, msf, "", nil, pc.cli())
	both("  Go hello world, median", func(f Fleet) float64 { return pctl(f.Hello, 50) }, true, msf, "", nil, "")
	both("  tend status ID over hello", func(f Fleet) float64 { return pctl(f.StatusCLI, 50) - pctl(f.Hello, 50) }, true, msf,
		target(tg.overHello > 0, "<= "+msd(tg.overHello)), judge(tg.overHello > 0, under(tg.overHello)), "")
	both("tend down", func(f Fleet) float64 { return f.DownCLI.D().Seconds() }, false, secs,
		target(tg.down > 0, "<= "+secs(tg.down.Seconds())), judge(tg.down > 0, func(v float64) bool { return v <= tg.down.Seconds() }), pc.scale("stop"))
}

// otherTable is the table of the max_rss and agents fleets, the config
// loads, the memory reads and the event daemon.
func otherTable(w io.Writer, runs []Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "other daemons and measures\ttend\ttarget\tverdict\t\n")
	t := measure.Table[Results]{W: tw, Runs: runs}
	fleet := func(label string) func(r Results) (Fleet, bool) {
		return func(r Results) (Fleet, bool) {
			for _, f := range r.Fleets {
				if f.Label == label {
					return f, true
				}
			}
			return Fleet{}, false
		}
	}
	idle := func(label string) func(Results) (float64, bool) {
		return func(r Results) (float64, bool) {
			f, ok := fleet(label)(r)
			return f.Idle.percent(), ok && f.Error == ""
		}
	}
	for _, label := range []string{"max_rss", "max_rss, cgroup off", "agents"} {
		f, ok := fleet(label)(runs[0])
		if !ok {
			continue
		}
		name := fmt.Sprintf("idle CPU, %s on %d (tracking %s)", label, f.N, cmp.Or(f.Tracking, "?"))
		if label == "agents" {
			name = fmt.Sprintf("idle CPU, %d idle agents (tracking %s)", f.N, cmp.Or(f.Tracking, "?"))
		}
		if f.Error != "" {
			t.Line(name, "stopped short: "+f.Error)
			continue
		}
		switch {
		case label == "agents" && f.N == targetWatchedAtCount:
			t.Row(name, idle(label), pct, "<= "+pct(targetAgentsPct), func(v float64) bool { return v <= targetAgentsPct }, "")
		case label != "agents" && f.N == targetWatchedAtCount && f.Tracking != program.TrackingCgroup:
			t.Row(name, idle(label), pct, "<= "+pct(targetWatchedPct)+" (issue 6)", func(v float64) bool { return v <= targetWatchedPct }, "")
		default:
			t.Row(name, idle(label), pct, "", nil, "")
		}
	}
	if mr := runs[0].MemoryReads; mr != nil {
		reads := func(p float64) func(Results) (float64, bool) {
			return func(r Results) (float64, bool) {
				if r.MemoryReads == nil || len(r.MemoryReads.CPU) == 0 {
					return 0, false
				}
				return pctl(r.MemoryReads.CPU, p), true
			}
		}
		name := fmt.Sprintf("sweep of %d groups' %s, CPU, p50", mr.Groups, mr.File)
		if len(mr.CPU) == 0 {
			t.Line(name, "not measured: "+mr.NotMeasured)
		} else {
			t.Row(name, reads(50), msf, "", nil, "")
			t.Row("  = % of a core at one sweep a second", func(r Results) (float64, bool) { v, ok := reads(50)(r); return v / 10, ok }, pct,
				"<= "+pct(targetWatchedCgroup)+" (issue 10)", func(v float64) bool { return v <= targetWatchedCgroup }, "")
		}
	}
	for _, cl := range runs[0].ConfigLoad {
		get := func(r Results) (float64, bool) {
			for _, c := range r.ConfigLoad {
				if c.Programs == cl.Programs && c.Instances == cl.Instances {
					return pctl(c.Samples, 50), true
				}
			}
			return 0, false
		}
		name := fmt.Sprintf("config load, %d programs x %d (%.0f KiB), p50", cl.Programs, cl.Instances, float64(cl.Bytes)/1024)
		if cl.Programs*cl.Instances == targetLoadInstances && cl.Instances == 1 {
			t.Row(name, get, msf, "<= "+msd(targetLoad10k), under(targetLoad10k), "")
		} else {
			t.Row(name, get, msf, "", nil, "")
		}
	}
	if runs[0].Events != nil {
		ev := func(f func(e *Events) float64) func(Results) (float64, bool) {
			return func(r Results) (float64, bool) {
				if r.Events == nil {
					return 0, false
				}
				return f(r.Events), true
			}
		}
		e0 := runs[0].Events
		t.Row("kill -> exited at SSE, 1 sub, p50", ev(func(e *Events) float64 { return pctl(e.Alone, 50) }), msf, "", nil, "")
		t.Row(fmt.Sprintf("same, %d more subs, p50", e0.Subscribers), ev(func(e *Events) float64 { return pctl(e.Crowd, 50) }), msf, "", nil, "")
		t.Row("added by the crowd, p50", ev(func(e *Events) float64 { return pctl(e.Crowd, 50) - pctl(e.Alone, 50) }), msf,
			"<= "+msd(targetFanoutAdded), under(targetFanoutAdded), "")
		t.Row("added by the crowd, p99", ev(func(e *Events) float64 { return pctl(e.Crowd, 99) - pctl(e.Alone, 99) }), msf, "", nil, "")
		t.Row("STATUS= sent -> GET status, p50", ev(func(e *Events) float64 { return pctl(e.Notify, 50) }), msf,
			"<= "+msd(targetNotifyP50), under(targetNotifyP50), "")
		t.Row("STATUS= sent -> GET status, p95", ev(func(e *Events) float64 { return pctl(e.Notify, 95) }), msf, "", nil, "")
	}
}

// writeDetails prints, run by run, what qualifies the tables.
func writeDetails(w io.Writer, runs []Results) {
	fmt.Fprintf(w, "\nDetails:\n")
	for _, r := range runs {
		fmt.Fprintf(w, "run %s:\n", r.Stamp)
		for _, f := range r.Fleets {
			fmt.Fprintf(w, "- %s, %d (%d x %d), tracking %s", f.Label, f.N, f.Programs, f.Instances, cmp.Or(f.Tracking, "?"))
			if f.Cgroup != "" {
				fmt.Fprintf(w, ", cgroup = %q", f.Cgroup)
			}
			errnos := ""
			if len(f.Errnos) > 0 {
				errnos = " " + kinds(f.Errnos)
			}
			fmt.Fprintf(w, ": API answered %s after the fork, last spawned event %s, %d spawned, %d spawn_failed%s, %d polls; daemon CPU during the start %s; between spawns %s (first tenth), %s (last tenth).\n",
				secs(f.Answered.D().Seconds()), secs(f.LastSpawn.D().Seconds()), f.Spawned, f.Failed, errnos, f.Polls,
				msd(f.StartCPU.D()), msd(f.FirstTenth.D()), msd(f.LastTenth.D()))
			if f.Floor != nil {
				fmt.Fprintf(w, "  Floor first: a Go loop started %d of %d sleeps with a pipe each in %s", f.Floor.Started, f.Floor.N, secs(f.Floor.Took.D().Seconds()))
				if f.Floor.Error != "" {
					fmt.Fprintf(w, " (%s)", f.Floor.Error)
				}
				fmt.Fprintln(w, ".")
			}
			fmt.Fprintf(w, "  At rest: PSS %s (anonymous %s), RSS %s, %d threads, %d descriptors %s in %d tables, the largest %d.",
				mib(float64(f.Mem.PSS)), mib(float64(f.Mem.PSSAnon)), mib(float64(f.Mem.RSS)), f.Mem.Threads, f.Mem.FDs, kinds(f.Mem.FDKinds), f.Mem.FDTables, f.Mem.FDLargest)
			if f.Peak.Samples > 0 {
				fmt.Fprintf(w, " Peak over %d samples: PSS %s (%s), RSS %s (%s), VmHWM %s.",
					f.Peak.Samples, mib(float64(f.Peak.PSS)), f.Peak.PSSPhase, mib(float64(f.Peak.RSS)), f.Peak.RSSPhase, mib(float64(f.Peak.HighWater)))
			}
			if f.Idle.Elapsed > 0 {
				fmt.Fprintf(w, " Idle: %s CPU in %v (%s by ticks), %.1f wakeups/s, other load %s CPUs.",
					msd(f.Idle.Run.D()), f.Idle.Elapsed.D().Round(time.Millisecond), msd(f.Idle.Ticks.D()),
					float64(f.Idle.Wakeups)/f.Idle.Elapsed.D().Seconds(), cpus(f.Idle.Others))
			}
			if f.StatusBytes > 0 {
				fmt.Fprintf(w, " Listing %.0f KiB; cold GET /v1/status %s; cold tend ps %s; tend ps p95 %s; tend status p95 %s; hello p95 %s.",
					float64(f.StatusBytes)/1024, msList(f.StatusCold), msList(f.PSCold), msf(pctl(f.PS, 95)), msf(pctl(f.StatusCLI, 95)), msf(pctl(f.Hello, 95)))
			}
			fmt.Fprintf(w, " tend down returned after %s, the daemon was reaped after %s.\n", msd(f.DownCLI.D()), msd(f.DownExit.D()))
			for _, n := range f.Notes {
				fmt.Fprintf(w, "  tend up said: %s\n", n)
			}
		}
		if mr := r.MemoryReads; mr != nil {
			fmt.Fprintf(w, "- memory reads: %d sweeps of %d groups' %s, wall p50 %s.", len(mr.CPU), mr.Groups, mr.File, msf(pctl(mr.Wall, 50)))
			if mr.NotMeasured != "" {
				fmt.Fprintf(w, " Not measured: %s.", mr.NotMeasured)
			}
			fmt.Fprintln(w)
		}
		if e := r.Events; e != nil {
			fmt.Fprintf(w, "- fan-out: each of %d extra subscribers got at least %d of the %d events published meanwhile. CPU per kill: daemon %s alone, %s with the crowd; the subscribers (this process) %s and %s.\n",
				e.Subscribers, e.Delivered, e.Published, msd(perKill(e.AloneCPU.Run, e.Alone)), msd(perKill(e.CrowdCPU.Run, e.Crowd)),
				msd(perKill(e.AloneSelf, e.Alone)), msd(perKill(e.CrowdSelf, e.Crowd)))
			fmt.Fprintf(w, "- notify: %d messages %v apart, %d overwritten before an answer showed them; one GET /v1/status/{id} %s (p50).\n",
				len(e.Notify), notifyEvery, e.NotifyMissed, msf(pctl(e.NotifyRequests, 50)))
		}
	}
	fmt.Fprint(w, `Notes:
- start -> all running: from just before the fork of tend up until a
  listing shows every instance running with a pid (found by polling the last
  instance's status, then /readyz's counts, never the full listing alone).
- CPU is /proc/PID/task/*/schedstat run time summed over the daemon's threads.
- descriptors per running instance is all the daemon's open descriptors,
  in every descriptor table (fixed ones included), over the instances running.
- cold: each request the first after -cold-gap without one, GET /v1/status
  and tend ps alternating, the first right after the idle window (a listing
  answers from process samples up to 10 s old and takes them again after its
  answer, docs/status.md: the first after the idle window samples itself);
  warm: back to back, after warm-ups.
- daemon PSS, peak: the largest of /proc/PID/smaps_rollup read every
  memory_every_ms from tend up until tend down (start, rest and listings);
  at rest: read once at the end of the idle window.
- the floor of start -> all running is one Go loop of pipe2 + ForkExec of
  sleep, run just before tend up (ForkExec returns once the child exec'd).
- tend ps, tend status ID and hello are exec'd with stdout to /dev/null; the
  peers' CLI figures are one call each in bench/peers (§1 one CLI call, §3 list).
- kill -> exited includes the kernel's teardown of the killed process.
- Compare figures taken in the same session: process creation speed varies
  a lot with the VM's load, and start and stop scale with it.
`)
}

// msList formats samples in ms, in the order taken.
func msList(s []measure.Ms) string {
	var parts []string
	for _, v := range s {
		parts = append(parts, fmt.Sprintf("%.1f", ms(v.D())))
	}
	return "[" + strings.Join(parts, " ") + "] ms"
}

func kinds(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// pctl is a percentile of samples, in ms.
func pctl(s []measure.Ms, p float64) float64 { return ms(measure.Percentile(s, p).D()) }

func under(target time.Duration) func(float64) bool {
	return func(v float64) bool { return v <= ms(target) }
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msf(v float64) string { return fmt.Sprintf("%.2f ms", v) }

func msd(d time.Duration) string { return msf(ms(d)) }

func secs(v float64) string { return fmt.Sprintf("%.2f s", v) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func pct(p float64) string { return fmt.Sprintf("%.3f %%", p) }

func count(v float64) string { return fmt.Sprintf("%.0f", v) }

func ratio(v float64) string { return fmt.Sprintf("%.2fx", v) }

// cpus formats a count of busy CPUs; negative means unknown.
func cpus(n float64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", n)
}

// perKill divides a CPU time by the number of kills measured.
func perKill(d measure.Ms, kills []measure.Ms) time.Duration {
	if len(kills) == 0 {
		return 0
	}
	return d.D() / time.Duration(len(kills))
}
