package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Targets.
const (
	targetUp          = 4 * time.Second
	targetPSS         = 25 << 20 // bytes
	targetIdlePct     = 0.03     // % of one core
	targetStatusP50   = 10 * time.Millisecond
	targetPS          = 25 * time.Millisecond
	targetWatchedPct6 = 1.5 // % of one core, issue 6
	targetWatchedPct4 = 2.0 // % of one core, issue 4
	targetDown        = 3 * time.Second
	targetFanoutAdded = 1 * time.Millisecond
	targetNotifyP50   = 1 * time.Millisecond
)

// Peer figures from ../shared/bench-peers/RESULTS.md (run 20261202T084628Z,
// same VM), section 3 at N=1000 unless marked. Idle CPU there is ms per 30 s:
// runit 3.5, supervisord 246.2, pm2 266.5, here as % of a core.
const (
	peerUp         = "s6 17.0, runit 22.6, pm2 26.5, supervisord 54.7 s"
	peerPSS        = "supervisord 40.7, runit 91.1, pm2 107.2, s6 122.7 MiB"
	peerRSS        = "supervisord 46, pm2 110 MiB; RSS-sum runit 1324, s6 1601"
	peerIdle       = "s6 0, runit 0.012, supervisord 0.82, pm2 0.89 %"
	peerList       = "(CLI) runit 34, pm2 814, supervisord 2531, s6 4778 ms"
	peerDown       = "runit 3.5, s6 6.5, supervisord 9.9, pm2 44.8 s"
	peerExitFloor  = "floor: Go wait4 wakes 0.55-0.57 ms after kill (§4)"
	peerStatusKill = "kill -> status API shows new pid: runit 9.1, s6 16.4, pm2 21.8 ms (§1)"
)

// printReport writes the table of one run and the notes that qualify it.
func printReport(w io.Writer, o options, res results) {
	f, wd, fo, nt := res.fleet, res.watched, res.fanout, res.notify
	fmt.Fprintf(w, "tend daemon at scale: tend up as its own process, N = %d programs of sleep 100000\n", o.n)
	fmt.Fprintf(w, "%s %s/%s, %d CPUs, load %s; tend built from %s; idle windows %v\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), measure.Loadavg(), res.from, o.idle)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tmeasure\ttend\ttarget\tverdict\tpeers at N=1000 (RESULTS.md)")
	row := func(num, name, value, target, verdict, peers string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", num, name, value, target, verdict, peers)
	}
	row("1", fmt.Sprintf("start -> all %d running", o.n), secs(f.allRunning), "<= "+secs(targetUp), verdict(f.allRunning <= targetUp), peerUp)
	row("2", "daemon PSS", mib(f.mem.pss), "<= "+mib(targetPSS), verdict(f.mem.pss <= targetPSS), peerPSS)
	row("", "daemon RSS", mib(f.mem.rss), "", "", peerRSS)
	row("3", "idle CPU, no watchdog", pct(f.idle.percent()), "<= "+pct(targetIdlePct), verdict(f.idle.percent() <= targetIdlePct), peerIdle)
	row("4", "GET /v1/status (all), p50", ms(measure.Percentile(f.statusRaw, 50)), "<= "+ms(targetStatusP50),
		verdict(measure.Percentile(f.statusRaw, 50) <= targetStatusP50), "")
	row("", "GET /v1/status (all), p95", ms(measure.Percentile(f.statusRaw, 95)), "", "", "")
	row("", "same + Go client decode, p50", ms(measure.Percentile(f.status, 50)), "", "", "")
	row("", "same + Go client decode, p95", ms(measure.Percentile(f.status, 95)), "", "", "")
	row("", "tend ps, median", ms(measure.Percentile(f.ps, 50)), "<= "+ms(targetPS), verdict(measure.Percentile(f.ps, 50) <= targetPS), peerList)
	row("5", "idle CPU, max_rss on all", pct(wd.idle.percent()), "<= "+pct(targetWatchedPct6)+" (issue 6)",
		verdict(wd.idle.percent() <= targetWatchedPct6), "")
	row("", "", "", "<= "+pct(targetWatchedPct4)+" (issue 4)", verdict(wd.idle.percent() <= targetWatchedPct4), "")
	row("6", "tend down", secs(f.downCLI), "<= "+secs(targetDown), verdict(f.downCLI <= targetDown), peerDown)
	added := measure.Percentile(fo.crowd, 50) - measure.Percentile(fo.alone, 50)
	row("7", "kill -> exited at SSE, 1 sub, p50", ms(measure.Percentile(fo.alone, 50)), "", "", peerExitFloor)
	row("", "kill -> exited at SSE, 1 sub, p99", ms(measure.Percentile(fo.alone, 99)), "", "", "")
	row("", fmt.Sprintf("same, %d more subs, p50", fo.subscribers), ms(measure.Percentile(fo.crowd, 50)), "", "", "")
	row("", fmt.Sprintf("same, %d more subs, p99", fo.subscribers), ms(measure.Percentile(fo.crowd, 99)), "", "", "")
	row("", "added by the crowd, p50", ms(added), "<= "+ms(targetFanoutAdded), verdict(added <= targetFanoutAdded), "")
	row("", "added by the crowd, p99", ms(measure.Percentile(fo.crowd, 99)-measure.Percentile(fo.alone, 99)), "", "", "")
	row("8", "STATUS= sent -> GET status, p50", ms(measure.Percentile(nt.lat, 50)), "<= "+ms(targetNotifyP50),
		verdict(measure.Percentile(nt.lat, 50) <= targetNotifyP50), peerStatusKill)
	row("", "STATUS= sent -> GET status, p95", ms(measure.Percentile(nt.lat, 95)), "", "", "")
	tw.Flush()

	fmt.Fprintf(w, `
Details:
- start: the API answered %s after the fork; the last spawned event is stamped %s
  after it; %d polls (the last program's status every %v, then the full
  listing every %v; the start figure is the first listing with all running).
  Daemon CPU during the start: %s. Time between spawns: %s over the first
  tenth, %s over the last (with max_rss: %s, %s).
- memory: PSS %s (anonymous %s), %d threads, %d open descriptors.
  With max_rss on all: PSS %s, RSS %s, %d threads.
- idle: %s CPU in %v (%s by /proc/PID/stat ticks), %.1f wakeups/s;
  with max_rss: %s CPU (%.1f wakeups/s). Other load: %s and %s CPUs busy.
- listing: %s of JSON for %d instances; tend ps p95 %s.
- tend down: the CLI returned after %s, the daemon was reaped after %s
  (with max_rss: %s).
- fan-out: each of the %d extra subscribers got at least %d of the %d events
  published while they were connected; kills %v apart. CPU per kill: daemon
  %s alone, %s with the crowd; this process (the subscribers) %s and %s.
- notify: %d messages %v apart, %d overwritten before an answer showed them;
  one GET /v1/status/{id} took %s (p50), the answer's arrival is the time
  seen, so a sample overstates by up to one request.
Notes:
- CPU is /proc/PID/task/*/schedstat run time summed over the daemon's threads.
- Peers' listing figures are their CLIs (sv status, pm2 jlist, supervisorctl,
  one s6-svstat per service). kill -> exited includes the kernel's teardown
  of the killed process (0.4-0.9 ms on this VM, RESULTS.md §1).
- Peer figures come from another day on this VM; process creation speed
  varies a lot with the VM's load. Start and stop scale with it.
`,
		secs(f.answered), secs(f.lastSpawn), f.polls, pollEvery, listEvery, ms(f.startCPU),
		ms(f.firstTenth), ms(f.lastTenth), ms(wd.firstTenth), ms(wd.lastTenth),
		mib(f.mem.pss), mib(f.mem.pssAnon), f.mem.threads, f.mem.fds,
		mib(wd.mem.pss), mib(wd.mem.rss), wd.mem.threads,
		ms(f.idle.run), f.idle.elapsed.Round(time.Millisecond), ms(f.idle.ticks), rate(f.idle.wakeups, f.idle.elapsed),
		ms(wd.idle.run), rate(wd.idle.wakeups, wd.idle.elapsed), cpus(f.idle.others), cpus(wd.idle.others),
		kib(f.statusSize), f.n, ms(measure.Percentile(f.ps, 95)),
		ms(f.downCLI), ms(f.downExit), ms(wd.downExit),
		fo.subscribers, fo.delivered, fo.published, o.gap,
		ms(perKill(fo.aloneCPU.run, fo.alone)), ms(perKill(fo.crowdCPU.run, fo.crowd)),
		ms(perKill(fo.aloneSelf, fo.alone)), ms(perKill(fo.crowdSelf, fo.crowd)),
		len(nt.lat), notifyEvery, nt.missed, ms(measure.Percentile(nt.requests, 50)))
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b int) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }

func pct(p float64) string { return fmt.Sprintf("%.3f %%", p) }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// cpus formats a count of busy CPUs; negative means unknown.
func cpus(n float64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", n)
}

// perKill divides a CPU time by the number of kills measured.
func perKill(d time.Duration, kills []time.Duration) time.Duration {
	if len(kills) == 0 {
		return 0
	}
	return d / time.Duration(len(kills))
}
