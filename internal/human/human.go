// Package human writes statuses the way people read them: durations, byte
// sizes, restart counts and the aligned table `tend ps` prints. The daemon
// renders that table itself (GET /v1/status?view=table), so a listing of a
// thousand instances reaches the terminal without being decoded in between,
// as kubectl's server-side printing does. Everything a program chose that
// these forms print goes through Escape (escape.go): no control reaches
// the operator's terminal.
package human

import (
	"fmt"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Duration writes d in its two largest units: "45s", "1m21s", "2h3m",
// "3d4h".
func Duration(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

// Bytes writes n in binary units with one decimal: "512B", "73.4MiB".
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || unit == "TiB" {
			return fmt.Sprintf("%.1f%s", v, unit)
		}
	}
	panic("unreachable")
}

// Restarts is the total with its causes: "3 (crash 2, clean 1)" or "0".
func Restarts(r program.Restarts) string {
	if r.Total() == 0 {
		return "0"
	}
	var parts []string
	for _, c := range program.RestartCauses() {
		if n := r.Of(c); n > 0 {
			label := causeLabels[c]
			if label == "" {
				label = c
			}
			parts = append(parts, fmt.Sprintf("%s %d", label, n))
		}
	}
	return fmt.Sprintf("%d (%s)", r.Total(), strings.Join(parts, ", "))
}

// causeLabels are the short words of the restart causes in a table.
var causeLabels = map[string]string{
	program.ReasonCrash: "crash", program.ReasonCleanExit: "clean", program.ReasonRSSWatchdog: "rss",
	program.ReasonWedgeRestart: "wedge", program.ReasonOperatorRestart: "operator",
}

// Uptime is how long the current run has been up, "-" when none runs.
func Uptime(st *program.Status) string {
	if !st.Alive() {
		return "-"
	}
	return Duration(time.Duration(st.UptimeMS) * time.Millisecond)
}

// RSS is the run's memory, "-" when unknown or nothing runs.
func RSS(n int64) string {
	if n <= 0 {
		return "-"
	}
	return Bytes(n)
}

// PID is the pid, "-" when nothing runs.
func PID(pid *int) string {
	if pid == nil {
		return "-"
	}
	return fmt.Sprint(*pid)
}

// Exit describes how a run ended: "exit 1", "signal SIGKILL" or
// "never started".
func Exit(code *int, signal *string) string {
	switch {
	case code != nil:
		return fmt.Sprintf("exit %d", *code)
	case signal != nil:
		return "signal " + *signal
	}
	return "never started"
}
