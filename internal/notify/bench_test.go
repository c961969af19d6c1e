package notify

import (
	"net"
	"slices"
	"testing"
	"time"
)

// BenchmarkDatagramToHandler measures one datagram from a client's write to
// the handler's return: the socket's share of "datagram -> status reflects
// it" (target p50 <= 1 ms end to end). It reports p50 and p99 besides ns/op.
func BenchmarkDatagramToHandler(b *testing.B) {
	got := make(chan struct{}, 1)
	s, err := Listen(b.TempDir()+"/bench.sock", func(Message) { got <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.Addr(), Net: "unixgram"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := []byte("WATCHDOG=1\nSTATUS=working on task 42\nX_TEND_TURN=active")
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		<-got
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
