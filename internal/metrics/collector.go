package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tend-sh/tend/internal/program"
)

// states, lifecycles and restartCauses are every value the enum gauges
// and the restarts counter report (program's lists, read once: a scrape
// of 10,000 instances reads them for each), so each instance always has
// the same set of series and a change of state is a change of value, not
// a series appearing. LifecycleUnknown is not among them: it only answers
// ids that do not exist, which a list never holds.
var (
	states        = program.States()
	lifecycles    = program.Lifecycles()
	restartCauses = program.RestartCauses()
)

func instanceDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"id", "program"}, extra...), nil)
}

// The descriptors. The last exit is split by kind of value: the code and the
// signal are numbers (comparable, alertable, and a new code does not make a
// new series), the likely cause is a string from a fixed set of eleven and so
// a label on an _info series, as kube-state-metrics does with a container's
// last exit code and reason.
var (
	descUp = instanceDesc("tend_instance_up",
		"1 when the instance has a run in place (a process not yet reaped), else 0.")
	descState = instanceDesc("tend_instance_state",
		"The instance's state: 1 for the current one, 0 for the others (starting, running, backoff, stopping, stopped, exited, fatal).",
		"state")
	descLifecycle = instanceDesc("tend_instance_lifecycle",
		"The instance's coarse lifecycle: 1 for the current one, 0 for the others (running, idle, done, error).",
		"lifecycle")
	descRestarts = instanceDesc("tend_instance_restarts_total",
		"Ends of the instance's runs that were followed by a restart, by cause. Resets when the program is removed and added again or the daemon restarts.",
		"cause")
	// Not tend_instance_crash_count: a _count suffix belongs to histograms
	// and summaries (promtool rejects it on a gauge).
	descCrashCount = instanceDesc("tend_instance_consecutive_crashes",
		"The instance's status crash_count: crashes since the last run that outlived stable_run_reset.")
	descDegraded = instanceDesc("tend_instance_degraded",
		"1 from the moment crash_count reaches max_crashes until a run outlives stable_run_reset, else 0.")
	descRSS = instanceDesc("tend_instance_resident_memory_bytes",
		"Memory the instance's run holds in bytes: its cgroup's memory.current with the memory controller, else the resident memory summed over its processes; 0 when nothing runs.")
	descPeak = instanceDesc("tend_instance_peak_memory_bytes",
		"The highest memory of the instance's current run in bytes: its cgroup's memory.peak where the kernel keeps it, else the highest sample of the memory watchdog; 0 when unknown.")
	descStart = instanceDesc("tend_instance_start_time_seconds",
		"Start time of the instance's current run since the Unix epoch in seconds; absent when nothing runs.")
	descExitCode = instanceDesc("tend_instance_last_exit_code",
		"Exit code of the instance's last ended run; absent before the first end and when that run was killed by a signal or never launched.")
	descExitSignal = instanceDesc("tend_instance_last_exit_signal",
		"Number of the signal that ended the instance's last run (9 is SIGKILL, 15 SIGTERM); absent when that run was not killed by a signal.")
	descExitTime = instanceDesc("tend_instance_last_exit_time_seconds",
		"Time the instance's last run ended since the Unix epoch in seconds; absent before the first end.")
	descExitInfo = instanceDesc("tend_instance_last_exit_info",
		"Always 1: the likely_cause label says why the instance's last run ended; absent before the first end.",
		"likely_cause")

	descKeeperRestarts = prometheus.NewDesc("tend_keeper_restarts_total",
		"Keepers (the process that holds tty runs' terminals beyond the daemon) that died while the daemon ran; each is replaced at once and handed every live tty run's terminal again.", nil, nil)
	descOrphans = prometheus.NewDesc("tend_orphans_reaped_total",
		"Children reaped that belonged to no instance (orphans adopted as subreaper or PID 1); counted and dropped.", nil, nil)
	descPublished = prometheus.NewDesc("tend_events_published_total",
		"Events published (numbered, logged and fanned out) since the daemon started.", nil, nil)
	descCutOff = prometheus.NewDesc("tend_event_subscribers_cut_off_total",
		"Event stream subscribers cut off because their buffer was full; each resumes with since=SEQ.", nil, nil)
	descStateWriteErrors = prometheus.NewDesc("tend_state_write_errors_total",
		"Writes to the state directory that failed (a full disk, an I/O error), by file; docs/daemon.md#when-the-disk-fills.", []string{"file"}, nil)
	descTurnWaits = prometheus.NewDesc("tend_instances_waiting_for_turn",
		"Instances whose stop or restart waits for their agent's turn to end (turn_grace).", nil, nil)
)

// collector reads a Source at every scrape. It keeps no state, so concurrent
// scrapes need no lock.
type collector struct {
	src  Source
	mode string // instancesDefault, instancesAll or instancesNone
}

func newCollector(src Source, mode string) *collector { return &collector{src: src, mode: mode} }

// Describe sends every descriptor, so the registry can check names and label
// sets once at registration.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descUp, descState, descLifecycle, descRestarts, descCrashCount, descDegraded, descRSS, descPeak,
		descStart, descExitCode, descExitSignal, descExitTime, descExitInfo,
		descOrphans, descKeeperRestarts, descPublished, descCutOff, descTurnWaits, descStateWriteErrors,
		descInstances, descLifecycles, descPrograms, descTransient,
	} {
		ch <- d
	}
}

// Collect sends the current snapshot's series and the daemon-wide counters.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if list := c.list(); list != nil {
		sts := list()
		waiting := 0
		for i := range sts {
			if c.perInstance(&sts[i]) {
				collectInstance(ch, &sts[i])
			}
			if sts[i].TurnWaitUntil != nil {
				waiting++
			}
		}
		ch <- prometheus.MustNewConstMetric(descTurnWaits, prometheus.GaugeValue, float64(waiting))
		c.collectFleet(ch, sts)
	}
	collectCounter(ch, descOrphans, c.src.OrphansReaped)
	collectCounter(ch, descKeeperRestarts, c.src.KeeperRestarts)
	collectCounter(ch, descPublished, c.src.EventsPublished)
	collectCounter(ch, descCutOff, c.src.SubscribersCut)
	if c.src.StateWriteErrors != nil {
		for file, n := range c.src.StateWriteErrors() {
			ch <- prometheus.MustNewConstMetric(descStateWriteErrors, prometheus.CounterValue, float64(n), file)
		}
	}
}

// list is how the scrape reads the fleet: with its processes when it sends
// per-instance series (their memory), else the cheaper bare list.
func (c *collector) list() func() []program.Status {
	if c.mode == instancesNone && c.src.Bare != nil {
		return c.src.Bare
	}
	return c.src.Statuses
}

func collectCounter(ch chan<- prometheus.Metric, d *prometheus.Desc, read func() uint64) {
	if read != nil {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(read()))
	}
}

// collectInstance sends one instance's series.
func collectInstance(ch chan<- prometheus.Metric, st *program.Status) {
	id, prog := st.ID, st.Program
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{id, prog}, extra...)...)
	}
	gauge(descUp, bool01(st.Alive()))
	for _, s := range states {
		gauge(descState, bool01(st.State == s), s)
	}
	for _, l := range lifecycles {
		gauge(descLifecycle, bool01(st.Lifecycle == l), l)
	}
	for _, c := range restartCauses {
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue,
			float64(st.Restarts.Of(c)), id, prog, c)
	}
	gauge(descCrashCount, float64(st.CrashCount))
	gauge(descDegraded, bool01(st.Degraded))
	gauge(descRSS, float64(st.RSSBytes))
	gauge(descPeak, float64(st.PeakRSS))
	if st.Alive() && !st.StartedAt.IsZero() {
		gauge(descStart, unixSeconds(st.StartedAt))
	}
	if le := st.LastExit; le != nil {
		collectLastExit(gauge, le)
	}
}

// collectLastExit sends the last exit's series through gauge.
func collectLastExit(gauge func(*prometheus.Desc, float64, ...string), le *program.LastExit) {
	if le.Code != nil {
		gauge(descExitCode, float64(*le.Code))
	}
	if le.Signal != nil {
		if n, ok := signalNumber(*le.Signal); ok {
			gauge(descExitSignal, float64(n))
		}
	}
	if !le.At.IsZero() {
		gauge(descExitTime, unixSeconds(le.At))
	}
	if le.LikelyCause != "" {
		gauge(descExitInfo, 1, le.LikelyCause)
	}
}

// signalNumber turns the names program.SignalName writes ("SIGKILL",
// "SIGRTMIN+3", "SIG99") back into numbers.
func signalNumber(name string) (int, bool) {
	if sig, ok := program.ParseSignal(name); ok {
		return int(sig), true
	}
	if k, ok := strings.CutPrefix(name, "SIGRTMIN+"); ok {
		n, err := strconv.Atoi(k)
		return 34 + n, err == nil && n >= 0
	}
	if k, ok := strings.CutPrefix(name, "SIG"); ok {
		n, err := strconv.Atoi(k)
		return n, err == nil && n > 0
	}
	return 0, false
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t program.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
