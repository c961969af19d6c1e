package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tend-sh/tend/internal/program"
)

// Series that do not grow with the fleet. A platform that starts and ends
// agents by the thousand (tend run --rm) must not make a new set of series
// for each: Prometheus keeps every series it has seen in its head block
// for hours, and a short-lived agent's dozens would pile up. So:
//
//   - the fleet is also counted in aggregate: instances by state and by
//     lifecycle, programs, and counters of runs started, runs ended by
//     likely_cause and restarts by reason over the daemon's life (fed by
//     the events, so an agent's runs still count once it is gone);
//   - per-instance series (tend_instance_*, labelled id and program) are
//     left out for the instances of transient programs (remove_on_exit),
//     unless the scrape asks ?instances=all; ?instances=none leaves them
//     out for every program: a fixed number of series whatever the fleet.
//
// Program labels never become metric labels: they are for selecting
// (GET /v1/status?label=), and a session id as a label value is exactly
// the explosion this avoids.

// Instances modes of a scrape (?instances=).
const (
	instancesDefault = ""     // every instance but those of transient programs
	instancesAll     = "all"  // every instance
	instancesNone    = "none" // none: aggregates only
)

var (
	descInstances = prometheus.NewDesc("tend_instances_in_state",
		"Instances by state: how many are starting, running, backing off, stopping, stopped, exited or fatal.", []string{"state"}, nil)
	descLifecycles = prometheus.NewDesc("tend_instances_in_lifecycle",
		"Instances by coarse lifecycle: running, idle, done, error.", []string{"lifecycle"}, nil)
	descPrograms = prometheus.NewDesc("tend_programs",
		"Programs the daemon has (from the config and added over the API).", nil, nil)
	descTransient = prometheus.NewDesc("tend_programs_transient",
		"Of those, programs that go once they end (remove_on_exit, tend run --rm): their instances have no tend_instance_* series unless a scrape asks ?instances=all.", nil, nil)
)

// fleetCounters are counted from the events: they outlive the instances
// they count.
type fleetCounters struct {
	spawned  prometheus.Counter
	exits    map[string]prometheus.Counter // by likely_cause, made up front
	restarts map[string]prometheus.Counter // by backoff reason, made up front
}

// likelyCauses and backoffReasons are every value of those labels, so each
// is a series from the first scrape.
var (
	likelyCauses = []string{
		program.CauseWedgeRestart, program.CauseOperatorRestart, program.CauseOperatorStop, program.CauseRSSWatchdog,
		program.CauseCleanExit, program.CauseRuntimeError, program.CauseGraceful, program.CauseOOMOrKill,
		program.CauseSpawnFailed, program.CauseStartTimeout, program.CauseOOMKill, program.CauseDaemonResources,
		program.CauseUnknown,
	}
	backoffReasons = []string{
		program.ReasonWedgeRestart, program.ReasonOperatorRestart, program.ReasonRSSWatchdog, program.ReasonCleanExit,
		program.ReasonBudgetExceeded, program.ReasonCrash, program.ReasonDaemonResources,
	}
)

func newFleetCounters() (*fleetCounters, []prometheus.Collector) {
	spawned := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tend_runs_started_total",
		Help: "Runs started (spawned) since the daemon started, over every instance, gone ones included.",
	})
	exits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_run_exits_total",
		Help: "Runs ended since the daemon started, by likely_cause, over every instance, gone ones included.",
	}, []string{"likely_cause"})
	restarts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_restarts_total",
		Help: "Restarts (backoff events) since the daemon started, by reason, over every instance, gone ones included.",
	}, []string{"reason"})
	f := &fleetCounters{spawned: spawned, exits: map[string]prometheus.Counter{}, restarts: map[string]prometheus.Counter{}}
	for _, c := range likelyCauses {
		f.exits[c] = exits.WithLabelValues(c)
	}
	for _, r := range backoffReasons {
		f.restarts[r] = restarts.WithLabelValues(r)
	}
	return f, []prometheus.Collector{spawned, exits, restarts}
}

// CountEvent counts an event in the fleet's counters (spawned, exited,
// backoff; the others are not counted here). It never blocks.
func (m *Metrics) CountEvent(e program.Event) {
	if m == nil {
		return
	}
	switch d := e.Data.(type) {
	case *program.Spawned:
		m.fleet.spawned.Inc()
	case *program.Exited:
		if c, ok := m.fleet.exits[d.LikelyCause]; ok {
			c.Inc()
		}
	case *program.Backoff:
		if c, ok := m.fleet.restarts[d.Reason]; ok {
			c.Inc()
		}
	}
}

// collectFleet sends the aggregate series of sts.
func (c *collector) collectFleet(ch chan<- prometheus.Metric, sts []program.Status) {
	byState := make(map[string]int, len(states))
	byLifecycle := make(map[string]int, len(lifecycles))
	programs := map[string]bool{}
	transient := 0
	for i := range sts {
		byState[sts[i].State]++
		byLifecycle[sts[i].Lifecycle]++
		if !programs[sts[i].Program] {
			programs[sts[i].Program] = true
			if c.transient(sts[i].Program) {
				transient++
			}
		}
	}
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(byState[s]), s)
	}
	for _, l := range lifecycles {
		ch <- prometheus.MustNewConstMetric(descLifecycles, prometheus.GaugeValue, float64(byLifecycle[l]), l)
	}
	if c.src.Programs != nil {
		ch <- prometheus.MustNewConstMetric(descPrograms, prometheus.GaugeValue, float64(c.src.Programs()))
	}
	ch <- prometheus.MustNewConstMetric(descTransient, prometheus.GaugeValue, float64(transient))
}

// transient says whether program's instances are left out by default.
func (c *collector) transient(name string) bool {
	return c.src.Transient != nil && c.src.Transient(name)
}

// perInstance says whether a scrape in mode sends st's own series.
func (c *collector) perInstance(st *program.Status) bool {
	switch c.mode {
	case instancesAll:
		return true
	case instancesNone:
		return false
	}
	return !c.transient(st.Program)
}

// Handler serves the registry in the Prometheus text format. A collector
// that fails does not fail the scrape: the rest is served and the failure is
// counted in promhttp_metric_handler_errors_total. ?instances=all or none
// chooses the per-instance series (see above); anything else is a 400.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := m.handlers[r.URL.Query().Get("instances")]
		if !ok {
			http.Error(w, `instances: want all or none (default: every instance but those of remove_on_exit programs)`, http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
