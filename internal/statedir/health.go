package statedir

import (
	"errors"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Health is what the writers of one state directory (and its
// subdirectories, which share it) report: which files cannot be written
// now and why, and how many writes failed, per file. The daemon reads it
// to say so out loud (docs/daemon.md#when-the-disk-fills): a stderr line,
// the tend_state_write_errors_total metric, /readyz and tend doctor. A nil
// *Health takes reports and holds nothing.
type Health struct {
	mu      sync.Mutex // guards the rest
	failing map[string]*Failure
	errors  map[string]uint64 // write errors so far, by file
	healed  []Failure         // failures that ended, not yet taken by Healed

	changed chan struct{} // holds a value once the failing files change (Changed)
}

// Failure is one file that could not be written: since when, the last
// error, and how many writes failed while it lasted.
type Failure struct {
	File   string
	Err    error
	Cause  string // the system's error alone (no path, no temporary name): a new Cause is a new cause
	Since  time.Time
	Errors uint64
	Ended  time.Time // when a write succeeded again (Healed only)
}

// NoSpace says whether err is the disk (or a quota) being full, as
// opposed to another I/O error.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, io.ErrShortWrite)
}

func newHealth() *Health {
	return &Health{failing: map[string]*Failure{}, errors: map[string]uint64{}, changed: make(chan struct{}, 1)}
}

// Changed gets a value when the failing files change: one starts or stops
// failing, or fails for another cause. The daemon's watcher waits on it
// instead of looking every second, so an idle daemon is not woken for it.
func (h *Health) Changed() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.changed
}

// change wakes a waiter on Changed (one value stands for any number).
func (h *Health) change() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// Failed reports that a write of file failed with err.
func (h *Health) Failed(file string, err error) {
	if h == nil || err == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errors[file]++
	f, ok := h.failing[file]
	if !ok {
		f = &Failure{File: file, Since: time.Now()}
		h.failing[file] = f
	}
	if why := cause(err).Error(); !ok || why != f.Cause {
		f.Cause = why
		h.change()
	}
	f.Err = err
	f.Errors++
}

// Wrote reports that a write of file succeeded: a failure of it ends.
func (h *Health) Wrote(file string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if f, ok := h.failing[file]; ok {
		delete(h.failing, file)
		f.Ended = time.Now()
		h.healed = append(h.healed, *f)
		h.change()
	}
}

// Report is Failed for a non-nil err, else Wrote.
func (h *Health) Report(file string, err error) {
	if err != nil {
		h.Failed(file, err)
	} else {
		h.Wrote(file)
	}
}

// Failing lists the files that cannot be written now, by name.
func (h *Health) Failing() []Failure {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Failure, 0, len(h.failing))
	for _, f := range h.failing {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Failure) int {
		switch {
		case a.File < b.File:
			return -1
		case a.File > b.File:
			return 1
		}
		return 0
	})
	return out
}

// Healed returns (and forgets) the failures that ended since the last call.
func (h *Health) Healed() []Failure {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.healed
	h.healed = nil
	return out
}

// Errors returns the write errors so far, by file.
func (h *Health) Errors() map[string]uint64 {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]uint64, len(h.errors))
	for k, v := range h.errors {
		out[k] = v
	}
	return out
}
