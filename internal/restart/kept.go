package restart

import (
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Kept is a History in the form the next daemon reads back (package kept's
// intent record): the counters, and the end times still inside each
// windowed budget. The windows are kept too, so a loop does not get a fresh
// budget from a daemon crash (which the loop itself may have caused, by
// memory say): the budgets exist to pace a loop, and a crash of the daemon
// is no evidence that it ended.
type Kept struct {
	CrashCount int              `json:"crash_count"`
	Degraded   bool             `json:"degraded,omitempty"`
	Restarts   program.Restarts `json:"restarts"`
	// ResourceFails counts the consecutive spawns the daemon could not make.
	ResourceFails int `json:"resource_fails,omitempty"`
	// End times inside the clean-restart, memory-drain and wedge windows,
	// in Unix milliseconds (short: a record may hold a dozen).
	Clean []int64 `json:"clean_ends,omitempty"`
	RSS   []int64 `json:"rss_ends,omitempty"`
	Wedge []int64 `json:"wedge_ends,omitempty"`
}

// Keep is h as the intent record keeps it at now: only the end times still
// inside s's windows, so the record of a long-lived loop stays small. h is
// not changed.
func (h *History) Keep(s *program.Spec, now time.Time) Kept {
	return Kept{
		CrashCount: h.CrashCount, Degraded: h.Degraded, Restarts: h.Restarts,
		ResourceFails: h.resourceFails,
		Clean:         h.clean.inside(now, s.CleanRestartWindow),
		RSS:           h.rss.inside(now, s.RSSLoopWindow),
		Wedge:         h.wedge.inside(now, s.WedgeLoopWindow),
	}
}

// Restore is the History an intent record kept.
func Restore(k Kept) History {
	return History{
		CrashCount: k.CrashCount, Degraded: k.Degraded, Restarts: k.Restarts,
		resourceFails: k.ResourceFails,
		clean:         fromMillis(k.Clean),
		rss:           fromMillis(k.RSS),
		wedge:         fromMillis(k.Wedge),
	}
}

// inside is the times after now-size, in Unix milliseconds; nil when none.
func (w window) inside(now time.Time, size time.Duration) []int64 {
	cutoff := now.Add(-size)
	var out []int64
	for _, t := range w {
		if t.After(cutoff) {
			out = append(out, t.UnixMilli())
		}
	}
	return out
}

func fromMillis(ms []int64) window {
	var w window
	for _, m := range ms {
		w = append(w, time.UnixMilli(m))
	}
	return w
}
