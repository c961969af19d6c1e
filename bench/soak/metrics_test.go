//go:build soak

package soak

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// metrics reads the daemon's /metrics over its unix socket into a map from
// each series (name and labels, as printed) to its value. The test uses the
// Go runtime's figures to tell a heap or goroutine leak from a resident set
// that merely settles higher.
func metrics(socket string) (map[string]float64, error) {
	hc := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://tend/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// runtimeFigures is one line of the daemon's Go heap in use, goroutines and
// open descriptors, from its metrics ("?" when unreadable).
func runtimeFigures(socket string) string {
	m, err := metrics(socket)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("heap %.1f MiB, %.0f goroutines, %.0f fds",
		m["go_memstats_heap_inuse_bytes"]/(1<<20), m["go_goroutines"], m["process_open_fds"])
}
