package restart

import "time"

// window is the end times of one kind of end inside a sliding window. Each
// budget has its own, per instance: nothing is shared between instances.
type window []time.Time

// record adds now, drops the times that fell out of the window, and returns
// how many ends lie inside it, now included.
func (w *window) record(now time.Time, size time.Duration) int {
	w.add(now)
	return w.count(now, size)
}

func (w *window) add(now time.Time) { *w = append(*w, now) }

// count drops the times at or before now-size and returns how many remain.
func (w *window) count(now time.Time, size time.Duration) int {
	cutoff := now.Add(-size)
	keep := (*w)[:0]
	for _, t := range *w {
		if t.After(cutoff) {
			keep = append(keep, t)
		}
	}
	*w = keep
	return len(keep)
}

// WedgeRestarts is how many wedge restarts fall inside the program's
// wedge_loop_window at now: the wedge watchdog pauses once it passes
// wedge_loop_budget.
func (h *History) WedgeRestarts(window time.Duration, now time.Time) int {
	return h.wedge.count(now, window)
}

// WedgePauseEnds is when the oldest wedge restart in the window leaves it,
// making room for another: the end of a wedge_restart_loop pause.
func (h *History) WedgePauseEnds(window time.Duration, now time.Time) time.Time {
	if h.wedge.count(now, window) == 0 {
		return now
	}
	return h.wedge[0].Add(window)
}
