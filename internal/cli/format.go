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
// A field holding a control is quoted; nothing in the line is a raw control
// (human.Escape).
func FormatEvent(e program.Event) string {
	return human.Escape(formatEvent(e))
}

func formatEvent(e program.Event) string {
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
	for _, f := range eventFields(e.Kind, e.Data) {
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
	if s == "" || strings.ContainsAny(s, " \t\n\"=") || human.Escape(s) != s {
		s = strconv.Quote(s)
	}
	return key + "=" + s
}

// eventFields are the key=value fields of an event's payload, by its kind
// (every one of program.Kinds has its own; format_test checks).
func eventFields(kind string, data any) []string {
	if f, ok := kindFields[kind]; ok {
		return f(data)
	}
	return unknownFields(data)
}

// fieldsOf formats a payload of type T with f; another payload under the
// kind's name is formatted as one of an unknown kind.
func fieldsOf[T any](f func(T) []string) func(any) []string {
	return func(data any) []string {
		if v, ok := payload[T](data); ok {
			return f(v)
		}
		return unknownFields(data)
	}
}

var kindFields = map[string]func(any) []string{
	program.KindSpawned: fieldsOf(func(v program.Spawned) []string {
		return []string{kv("pid", v.PID), kv("run", v.Run)}
	}),
	program.KindSpawnFailed: fieldsOf(func(v program.SpawnFailed) []string {
		f := []string{kv("error", v.Error)}
		if v.Errno != "" {
			f = append(f, kv("errno", v.Errno))
		}
		return f
	}),
	program.KindExited: fieldsOf(exitedFields),
	program.KindBackoff: fieldsOf(func(v program.Backoff) []string {
		return []string{kv("ms", v.MS), kv("reason", v.Reason), kv("crash_count", v.CrashCount)}
	}),
	program.KindHealthWarn: fieldsOf(func(v program.HealthWarn) []string {
		f := []string{kv("reason", v.Reason), kv("count", v.Count)}
		if v.WindowMS > 0 {
			f = append(f, kv("window_ms", v.WindowMS))
		}
		if v.Max > 0 {
			f = append(f, kv("max", v.Max))
		}
		return f
	}),
	program.KindWedged: fieldsOf(func(v program.Wedged) []string {
		return []string{kv("source", v.Source), kv("detail", v.Detail)}
	}),
	program.KindRSSExceeded: fieldsOf(func(v program.RSSExceeded) []string {
		return []string{kv("rss", human.Bytes(v.RSSBytes)), kv("max_rss", human.Bytes(v.MaxRSS))}
	}),
	program.KindGaveUp: fieldsOf(func(v program.GaveUp) []string {
		return []string{kv("crash_count", v.CrashCount), kv("max", v.Max)}
	}),
	program.KindStatusChanged: fieldsOf(func(v program.Status) []string {
		return []string{kv("state", v.State), kv("lifecycle", v.Lifecycle), kv("why", v.Why)}
	}),
	program.KindTrackedChanged: fieldsOf(func(v program.TrackedChanged) []string {
		f := []string{kv("count", v.Count)}
		if len(v.Added) > 0 {
			f = append(f, kv("added", someIDs(v.Added)))
		}
		if len(v.Removed) > 0 {
			f = append(f, kv("removed", someIDs(v.Removed)))
		}
		return f
	}),
	program.KindTurn: fieldsOf(func(v program.Turn) []string {
		f := []string{kv("phase", v.Phase), kv("prompt_id", v.PromptID)}
		if v.StopReason != "" {
			f = append(f, kv("stop_reason", v.StopReason))
		}
		if v.DurationMS != nil {
			f = append(f, kv("duration_ms", *v.DurationMS))
		}
		return f
	}),
	program.KindPermission: fieldsOf(func(v program.Permission) []string {
		f := []string{kv("phase", v.Phase), kv("request_id", v.RequestID)}
		if v.Phase == program.PhaseAsked {
			f = append(f, kv("title", v.Title), kv("tool_kind", v.ToolKind))
		} else {
			f = append(f, kv("option_id", v.OptionID), kv("by", v.By))
		}
		return f
	}),
	program.KindDaemon: fieldsOf(func(v program.DaemonPhase) []string {
		f := []string{kv("phase", v.Phase)}
		if v.PID > 0 {
			f = append(f, kv("pid", v.PID))
		}
		if v.Count != nil {
			f = append(f, kv("count", *v.Count))
		}
		if v.From != "" || v.To != "" {
			f = append(f, kv("from", v.From), kv("to", v.To))
		}
		if v.LostFrom > 0 {
			f = append(f, kv("lost_from", v.LostFrom), kv("lost_to", v.LostTo))
		}
		if v.File != "" {
			f = append(f, kv("file", v.File))
		}
		if v.Errors > 0 {
			f = append(f, kv("errors", v.Errors))
		}
		if v.Error != "" {
			f = append(f, kv("error", v.Error))
		}
		return f
	}),
}

// unknownFields are the fields of a kind this build does not know, sorted
// by key.
func unknownFields(data any) []string {
	m, ok := payload[map[string]any](data)
	if !ok {
		return nil
	}
	var f []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "seq" && k != "ts" && k != "kind" && k != "id" && k != "program" {
			f = append(f, kv(k, m[k]))
		}
	}
	return f
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

// shownIDs is how many ids of a tracked_changed event its line names: a
// fleet's first start adds thousands, and one line of them all helps no
// one (--json has every id).
const shownIDs = 8

// someIDs joins the first shownIDs of ids, and says how many more there are.
func someIDs(ids []string) string {
	if len(ids) <= shownIDs {
		return strings.Join(ids, ",")
	}
	return strings.Join(ids[:shownIDs], ",") + fmt.Sprintf(",…+%d", len(ids)-shownIDs)
}
