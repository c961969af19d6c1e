package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The protocol agents' metrics (docs/protocol.md#metrics): turns by stop
// reason, their durations, and permission requests by who answered. The
// label values are bounded: stop reasons are the protocol's few (anything
// else counts as "other"), answers operator, policy or cancelled.
type protocolMetrics struct {
	turns    *prometheus.CounterVec
	duration prometheus.Histogram
	answers  *prometheus.CounterVec
}

var knownStops = map[string]bool{
	"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true,
	"cancelled": true, "run_ended": true, "error": true,
}

func newProtocolMetrics() (*protocolMetrics, []prometheus.Collector) {
	p := &protocolMetrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_protocol_turns_total",
			Help: "Turns of protocol agents that ended, by stop reason (end_turn, max_tokens, max_turn_requests, refusal, cancelled, run_ended, error, other).",
		}, []string{"stop_reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tend_protocol_turn_duration_seconds",
			Help:    "Duration of protocol agents' turns, from the prompt sent to its stop reason, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14), // 50ms to ~7m
		}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_protocol_permission_requests_total",
			Help: "Permission requests of protocol agents, by who answered: operator, policy or cancelled.",
		}, []string{"answer"}),
	}
	for _, a := range []string{"operator", "policy", "cancelled"} {
		p.answers.WithLabelValues(a)
	}
	p.turns.WithLabelValues("end_turn")
	return p, []prometheus.Collector{p.turns, p.duration, p.answers}
}

// ObserveTurn counts one protocol turn's end.
func (m *Metrics) ObserveTurn(stopReason string, d time.Duration) {
	if m == nil {
		return
	}
	if !knownStops[stopReason] {
		stopReason = "other"
	}
	m.proto.turns.WithLabelValues(stopReason).Inc()
	m.proto.duration.Observe(max(d, 0).Seconds())
}

// CountPermission counts one permission request's answer.
func (m *Metrics) CountPermission(by string) {
	if m == nil {
		return
	}
	m.proto.answers.WithLabelValues(by).Inc()
}
