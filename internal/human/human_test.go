package human

import (
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", 999 * time.Millisecond: "0s", 45 * time.Second: "45s",
		81234 * time.Millisecond: "1m21s", 65 * time.Second: "1m5s", time.Hour + 3*time.Minute + 9*time.Second: "1h3m",
		50 * time.Hour: "2d2h",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{
		0: "0B", 1023: "1023B", 1024: "1.0KiB", 73400320: "70.0MiB", 76965478: "73.4MiB",
		3 << 30: "3.0GiB", 5 << 40: "5.0TiB", 5 << 50: "5120.0TiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for r, want := range map[program.Restarts]string{
		{}:                                    "0",
		{Crash: 2, CleanExit: 1}:              "3 (crash 2, clean 1)",
		{RSSWatchdog: 1}:                      "1 (rss 1)",
		{WedgeRestart: 2, OperatorRestart: 1}: "3 (wedge 2, operator 1)",
	} {
		if got := Restarts(r); got != want {
			t.Errorf("Restarts(%+v) = %q, want %q", r, got, want)
		}
	}
}
