package metrics

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tend-sh/tend/internal/program"
)

// bigFleet is n instances cycling through the shapes of fleet().
func bigFleet(n int) []program.Status {
	shapes := fleet()
	out := make([]program.Status, n)
	for i := range out {
		s := shapes[i%len(shapes)]
		s.Program = fmt.Sprintf("prog%d", i/10)
		s.Instance = i % 10
		s.ID = program.InstanceID(s.Program, s.Instance)
		out[i] = s
	}
	return out
}

// BenchmarkCollect1000 is the collector alone: 1,000 instances gathered into
// metric families (no encoding, no Go or process collector).
func BenchmarkCollect1000(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(fakeSource(bigFleet(1000)), instancesDefault))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScrape1000 is a whole /metrics request for 1,000 instances: the
// tend collector, the Go and process collectors, and the text encoding.
func BenchmarkScrape1000(b *testing.B) {
	h := New(fakeSource(bigFleet(1000))).Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
