package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mem is one reading of a process's memory, in bytes.
type Mem struct {
	PSS, RSS int64
	PSSAnon  int64 // of PSS, the anonymous pages: the heap, stacks
}

// ReadMem reads pid's PSS (shared pages split fairly), its anonymous part,
// and RSS (shared pages counted whole) from /proc/PID/smaps_rollup.
func ReadMem(pid int) (Mem, error) {
	var m Mem
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			m.RSS = kb << 10
		case "Pss:":
			m.PSS = kb << 10
		case "Pss_Anon:":
			m.PSSAnon = kb << 10
		}
	}
	if m.PSS == 0 {
		return m, fmt.Errorf("/proc/%d/smaps_rollup has no Pss", pid)
	}
	return m, nil
}

// HighWater is pid's VmHWM, the largest RSS it ever had, in bytes (0 if unknown).
func HighWater(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// Peak is the largest memory a MemWatch saw, with the phase it was in.
type Peak struct {
	PSS       int64  `json:"pss_bytes"`
	PSSPhase  string `json:"pss_phase"`
	RSS       int64  `json:"rss_bytes"`
	RSSPhase  string `json:"rss_phase"`
	HighWater int64  `json:"vm_hwm_bytes"` // the process's own RSS high-water mark when the watch stopped
	Samples   int    `json:"samples"`
	Every     Ms     `json:"every_ms"`
}

// MemWatch samples a process's PSS and RSS at a fixed pace and keeps the
// peaks: a daemon's footprint through a whole phase sequence (start,
// rest, listings), not one reading at rest. Reading smaps_rollup takes
// the target's memory map lock for reading only; nothing else of the
// target is disturbed.
type MemWatch struct {
	pid   int
	every time.Duration
	done  chan struct{}
	over  chan struct{}

	mu    sync.Mutex // guards phase and peak
	phase string
	peak  Peak
}

// WatchMem starts sampling pid every interval, in phase.
func WatchMem(pid int, every time.Duration, phase string) *MemWatch {
	w := &MemWatch{pid: pid, every: every, done: make(chan struct{}), over: make(chan struct{}), phase: phase}
	w.peak.Every = NewMs(every)
	go w.loop()
	return w
}

func (w *MemWatch) loop() {
	defer close(w.over)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.sample()
		select {
		case <-t.C:
		case <-w.done:
			return
		}
	}
}

func (w *MemWatch) sample() {
	m, err := ReadMem(w.pid)
	if err != nil {
		return // the process is gone or exiting
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peak.Samples++
	if m.PSS > w.peak.PSS {
		w.peak.PSS, w.peak.PSSPhase = m.PSS, w.phase
	}
	if m.RSS > w.peak.RSS {
		w.peak.RSS, w.peak.RSSPhase = m.RSS, w.phase
	}
}

// Phase names what the process is doing from now on.
func (w *MemWatch) Phase(p string) {
	w.mu.Lock()
	w.phase = p
	w.mu.Unlock()
}

// Stop takes a last sample, ends the watch and returns the peaks.
func (w *MemWatch) Stop() Peak {
	close(w.done)
	<-w.over
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peak.HighWater = HighWater(w.pid)
	return w.peak
}
