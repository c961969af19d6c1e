// Package metrics is tend's Prometheus exposition (GET /metrics).
//
// Per-instance series are read from the broker's status snapshot at scrape
// time by a custom collector, never kept up to date event by event: a scrape
// shows exactly the registered instances, an instance that is removed simply
// stops appearing, and nothing here grows with the number of events. The
// daemon-wide counters are read the same way from the counters their owners
// already keep (reaper, event log). The state this package owns is what no
// one else counts: the exit-detection histogram, which the reaper's caller
// feeds through ObserveExitDetection, and the dropped notify datagrams by
// reason, fed through CountNotifyDrop.
//
// Conventions: base units (seconds, bytes), _total on counters, enums as one
// gauge per possible value (1 for the current one, 0 for the others), numbers
// as values and bounded strings as labels.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
)

// Source is what the metrics read at scrape time; the daemon implements it.
// Scrapes may run concurrently, so every function must be safe to call from
// several goroutines at once. A nil function leaves its metric out (a daemon
// without a reaper has no orphans to report).
type Source struct {
	Statuses        func() []program.Status   // broker.List(false): one consistent snapshot
	Bare            func() []program.Status   // the same without processes (broker.ListBare), for the counts alone; nil: Statuses
	Transient       func(program string) bool // the program goes once it ends (remove_on_exit)
	Programs        func() int                // how many programs there are
	OrphansReaped   func() uint64             // reaper.Orphans
	EventsPublished func() uint64             // events.Log.Published
	SubscribersCut  func() uint64             // events.Log.CutOffs
	KeeperRestarts  func() uint64             // keepers replaced after dying (docs/terminal.md#a-keeper-that-dies)
	// StateWriteErrors: failed writes to the state directory by file
	// (statedir.Health.Errors, the audit log's from events.Log.WriteErrors).
	StateWriteErrors func() map[string]uint64
}

// Metrics is tend's registry: the tend collector, the exit-detection
// histogram, and the standard Go and process collectors. Its methods are safe
// for concurrent use; a nil *Metrics observes nothing.
type Metrics struct {
	reg           *prometheus.Registry    // the default scrape's
	handlers      map[string]http.Handler // by ?instances= mode; read-only after New
	fleet         *fleetCounters
	exitDetection prometheus.Histogram // safe for concurrent use; no lock needed

	// notifyDropped has one counter per notify.DropReasons value, made up
	// front so every reason is a series from the first scrape (a rate over
	// a series that appears with its first drop misses that drop). The map
	// is read-only after New; the counters are safe for concurrent use.
	notifyDropped map[string]prometheus.Counter
	proto         *protocolMetrics
}

// exitDetectionBuckets run from 50µs to ~100ms, doubling: the reaper's path
// from SIGCHLD to a published exited event is normally well under a
// millisecond, and anything past 100ms is a problem worth seeing as +Inf.
var exitDetectionBuckets = prometheus.ExponentialBuckets(50e-6, 2, 12)

// New builds a registry with the tend collector, the standard Go collector
// and the process collector.
func New(src Source) *Metrics {
	m := &Metrics{
		exitDetection: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tend_exit_detection_seconds",
			Help:    "Time from the reaper's SIGCHLD wake-up to the exited event of the run it reaped, in seconds.",
			Buckets: exitDetectionBuckets,
		}),
	}
	drops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_notify_datagrams_dropped_total",
		Help: "Notify socket datagrams dropped whole, by reason: malformed (empty, a NUL byte, no valid assignment), oversized (over 4096 bytes), read_error.",
	}, []string{"reason"})
	m.notifyDropped = make(map[string]prometheus.Counter, len(notify.DropReasons))
	for _, r := range notify.DropReasons {
		m.notifyDropped[r] = drops.WithLabelValues(r)
	}
	fleet, counters := newFleetCounters()
	m.fleet = fleet
	proto, pcs := newProtocolMetrics()
	m.proto = proto
	counters = append(counters, pcs...)
	shared := append([]prometheus.Collector{
		m.exitDetection,
		drops,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, counters...)
	// One registry per ?instances= mode, the same collectors in each but
	// tend's own, which sends the mode's per-instance series.
	m.handlers = map[string]http.Handler{}
	for _, mode := range []string{instancesDefault, instancesAll, instancesNone} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(append([]prometheus.Collector{newCollector(src, mode)}, shared...)...)
		m.handlers[mode] = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			Registry:      reg,
			ErrorHandling: promhttp.ContinueOnError,
		})
		if mode == instancesDefault {
			m.reg = reg
		}
	}
	return m
}

// ObserveExitDetection records how long one exit took from the reaper's
// SIGCHLD wake-up to its exited event.
func (m *Metrics) ObserveExitDetection(d time.Duration) {
	if m == nil {
		return
	}
	m.exitDetection.Observe(max(d, 0).Seconds())
}

// CountNotifyDrop counts one notify datagram dropped whole, under the reason
// notify.DropReason gives err. It is a notify Socket's OnDrop: it never
// blocks.
func (m *Metrics) CountNotifyDrop(err error) {
	if m == nil {
		return
	}
	m.notifyDropped[notify.DropReason(err)].Inc()
}
