package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// FormatEvent is an event as one human-readable line, as tend up and tend
// events print it:
//
//	12:03:04.123 #42 worker:0 exited code=1 cause=runtime_error crash_count=2 run_ms=812
//
// The time is local, with milliseconds; then the seq, the instance (left out
// for daemon-wide events), the kind, and the kind's fields as key=value.
func FormatEvent(e program.Event) string {
	var b strings.Builder
	b.WriteString(e.TS.Local().Format("15:04:05.000"))
	fmt.Fprintf(&b, " #%d", e.Seq)
	id := e.ID
	if st, ok := payload[program.Status](e.Data); ok && id == "" {
		id = st.ID
	}
	if id != "" {
		b.WriteString(" " + id)
	}
	b.WriteString(" " + e.Kind)
	for _, f := range eventFields(e.Data) {
		b.WriteString(" " + f)
	}
	return b.String()
}

// payload returns data as a T whether the event holds a T (published in
// process) or a *T (decoded from JSON).
func payload[T any](data any) (T, bool) {
	switch v := data.(type) {
	case T:
		return v, true
	case *T:
		if v != nil {
			return *v, true
		}
	}
	var zero T
	return zero, false
}

// kv formats one field, quoting values a reader could not split on spaces.
func kv(key string, v any) string {
	s := fmt.Sprint(v)
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		s = strconv.Quote(s)
	}
	return key + "=" + s
}

// eventFields are the key=value fields of an event's payload.
func eventFields(data any) []string {
	if v, ok := payload[program.Spawned](data); ok {
		return []string{kv("pid", v.PID), kv("run", v.Run)}
	}
	if v, ok := payload[program.SpawnFailed](data); ok {
		f := []string{kv("error", v.Error)}
		if v.Errno != "" {
			f = append(f, kv("errno", v.Errno))
		}
		return f
	}
	if v, ok := payload[program.Exited](data); ok {
		return exitedFields(v)
	}
	if v, ok := payload[program.Backoff](data); ok {
		return []string{kv("ms", v.MS), kv("reason", v.Reason), kv("crash_count", v.CrashCount)}
	}
	if v, ok := payload[program.HealthWarn](data); ok {
		f := []string{kv("reason", v.Reason), kv("count", v.Count)}
		if v.WindowMS > 0 {
			f = append(f, kv("window_ms", v.WindowMS))
		}
		if v.Max > 0 {
			f = append(f, kv("max", v.Max))
		}
		return f
	}
	if v, ok := payload[program.Wedged](data); ok {
		return []string{kv("source", v.Source), kv("detail", v.Detail)}
	}
	if v, ok := payload[program.RSSExceeded](data); ok {
		return []string{kv("rss", human.Bytes(v.RSSBytes)), kv("max_rss", human.Bytes(v.MaxRSS))}
	}
	if v, ok := payload[program.GaveUp](data); ok {
		return []string{kv("crash_count", v.CrashCount), kv("max", v.Max)}
	}
	if v, ok := payload[program.Status](data); ok {
		return []string{kv("state", v.State), kv("lifecycle", v.Lifecycle), kv("why", v.Why)}
	}
	if v, ok := payload[program.TrackedChanged](data); ok {
		return []string{kv("ids", strings.Join(v.IDs, ","))}
	}
	if v, ok := payload[program.DaemonPhase](data); ok {
		f := []string{kv("phase", v.Phase)}
		if v.PID > 0 {
			f = append(f, kv("pid", v.PID))
		}
		if v.Count != nil {
			f = append(f, kv("count", *v.Count))
		}
		return f
	}
	if m, ok := payload[map[string]any](data); ok { // a kind this build does not know
		var f []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k != "seq" && k != "ts" && k != "kind" && k != "id" && k != "program" {
				f = append(f, kv(k, m[k]))
			}
		}
		return f
	}
	return nil
}

func exitedFields(v program.Exited) []string {
	var f []string
	switch {
	case v.Code != nil:
		f = append(f, kv("code", *v.Code))
	case v.Signal != nil:
		f = append(f, kv("signal", *v.Signal))
	default:
		f = append(f, "code=null")
	}
	return append(f, kv("cause", v.LikelyCause), kv("crash_count", v.CrashCount), kv("run_ms", v.RunDurationMS))
}
