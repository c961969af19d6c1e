package main

import (
	"github.com/tend-sh/tend/bench/internal/measure"
)

// Results is one run as bench/restart/results/STAMP/results.json holds
// it: every sample the report quotes, the settings, the machine and the
// commit. The report is derived from it alone (and, for the peers'
// column, from the bench/peers results directory named with -peers).
type Results struct {
	Bench    string          `json:"bench"` // "restart"
	Stamp    string          `json:"stamp"`
	Machine  measure.Machine `json:"machine"`
	Tend     measure.Source  `json:"tend"`
	Settings Settings        `json:"settings"`
	Peers    string          `json:"peers,omitempty"` // the bench/peers results directory of the report's peers' columns
	Cgroup   CgroupInfo      `json:"cgroup"`
	Baseline Baseline        `json:"baseline"`
	Crash    []Crash         `json:"crash_loop"`
	Latency  []Latency       `json:"latency"`
}

// Settings are the knobs of the run (the flags).
type Settings struct {
	Duration     measure.Ms `json:"duration_ms"`           // baseline and crash-loop window
	Warmup       measure.Ms `json:"warmup_ms"`             // crash loop before its window
	Kills        int        `json:"kills"`                 // per variant, zero backoff
	Gap          measure.Ms `json:"gap_ms"`                // pause before each kill, the instance at rest
	DefaultKills int        `json:"default_kills"`         // per variant, default config (first crashes; half as many of each repeated kind)
	Age          measure.Ms `json:"default_age_ms"`        // a default-config run's age when killed
	AgeElapsed   measure.Ms `json:"repeat_elapsed_age_ms"` // a second run's age when killed, its backoff elapsed
	AgeWaiting   measure.Ms `json:"repeat_waiting_age_ms"` // a second run's age when killed, its backoff ahead
	CgroupFlag   string     `json:"cgroup_flag"`           // -cgroup as given ("" = found)
	Config       string     `json:"config_variants"`       // what each config variant sets
	Programs     string     `json:"programs_argv"`         // the programs run
	Defaults     string     `json:"default_settings"`      // the default config's relevant keys
}

// CgroupInfo says where the cgroup variants ran, or why they did not.
type CgroupInfo struct {
	Dir         string   `json:"dir,omitempty"`
	Controllers []string `json:"controllers"`
	NotMeasured string   `json:"not_measured,omitempty"`
}

// Baseline is fork+exec+wait of /bin/true in a loop, no supervisor.
type Baseline struct {
	Spawns  int        `json:"spawns"`
	Elapsed measure.Ms `json:"elapsed_ms"`
}

func (b Baseline) rate() float64 { return float64(b.Spawns) / b.Elapsed.D().Seconds() }

// Crash is one crash-loop window: /bin/false, zero backoff.
type Crash struct {
	Tracking string     `json:"tracking"` // "group" (no cgroups) or "cgroup"
	Restarts int64      `json:"restarts"` // spawned events in the window
	Events   uint64     `json:"events"`   // events published in the window (audit lines)
	Elapsed  measure.Ms `json:"elapsed_ms"`
	CPU      measure.Ms `json:"cpu_ms"` // this process's user+sys CPU in the window (children excluded)
	Failed   int64      `json:"spawn_failed"`
	Others   float64    `json:"others_cpus"` // CPUs other processes kept busy meanwhile; -1 unknown
}

func (c Crash) rate() float64 { return float64(c.Restarts) / c.Elapsed.D().Seconds() }

// cpuPerRestart is the daemon's CPU per restart, in ms; children are not counted.
func (c Crash) cpuPerRestart() float64 {
	if c.Restarts == 0 {
		return 0
	}
	return c.CPU.D().Seconds() * 1000 / float64(c.Restarts)
}

// Config variants of the latency phases.
const (
	configZero    = "zero_backoff" // backoff_initial = backoff_max = 0
	configDefault = "default"      // every key at its default; a fresh program's run killed older than backoff_initial: its first crash
	// The same program's next run killed too: its second crash, whose
	// backoff (2 s, less its jitter, from the run's start) has elapsed...
	configRepeatElapsed = "default_repeat_elapsed"
	// ...or has not: the replacement waits out what is left.
	configRepeatWaiting = "default_repeat_waiting"
)

// Latency is one variant of the exit-latency phase: one sample per kill.
type Latency struct {
	Config   string       `json:"config"`                // configZero or configDefault
	Tracking string       `json:"tracking"`              // "group" or "cgroup"
	Exited   []measure.Ms `json:"exited_ms"`             // kill -> exited event published
	Spawned  []measure.Ms `json:"spawned_ms"`            // kill -> the replacement's spawned event published
	Ages     []measure.Ms `json:"ages_ms,omitempty"`     // each killed run's age (default configs)
	Backoffs []measure.Ms `json:"backoffs_ms,omitempty"` // the wait each backoff event announced (0: none)
	Others   float64      `json:"others_cpus"`
}
