package metrics

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// TestPromtoolCheckMetrics runs the real `promtool check metrics` (Debian
// package prometheus; CI installs it) on a scrape. It exits non-zero and
// names the metric for any lint problem: a counter without _total, a
// non-base unit, a missing HELP.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testutil.Missing(t, "promtool not installed (apt-get install prometheus); TestScrapePassesPromlint runs the same lint in process")
	}
	m := New(fakeSource(fleet()))
	m.ObserveExitDetection(200 * time.Microsecond)
	text := scrape(t, m)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}
