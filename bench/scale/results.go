package main

import (
	"github.com/tend-sh/tend/bench/internal/measure"
)

// Results is one run as bench/scale/results/STAMP/results.json holds it:
// every sample the report quotes, the settings, the machine and the commit
// tend was built from. The report is derived from it alone (and, for the
// peers' columns, from the bench/peers results directory named by -peers).
type Results struct {
	Bench       string          `json:"bench"` // "scale"
	Stamp       string          `json:"stamp"`
	Machine     measure.Machine `json:"machine"`
	Tend        measure.Source  `json:"tend"`
	Settings    Settings        `json:"settings"`
	Peers       string          `json:"peers,omitempty"` // the bench/peers results directory of the report's peers' columns
	ConfigLoad  []ConfigLoad    `json:"config_load"`
	Fleets      []Fleet         `json:"fleets"`
	MemoryReads *MemoryReads    `json:"memory_reads,omitempty"`
	Events      *Events         `json:"events,omitempty"`
}

// Settings are the knobs of the run (the flags).
type Settings struct {
	Ns          []int      `json:"ns"`        // instances of each plain fleet
	OffNs       []int      `json:"off_ns"`    // sizes run again with cgroup = "off"
	Instances   int        `json:"instances"` // per program in the plain fleets
	Watched     int        `json:"watched"`   // instances of the max_rss fleets; 0 = none
	Agents      int        `json:"agents"`    // instances of the agents fleet; 0 = none
	Cgroup      string     `json:"cgroup"`    // [daemon] cgroup of the plain fleets
	Idle        measure.Ms `json:"idle_ms"`
	Settle      measure.Ms `json:"settle_ms"`
	Requests    int        `json:"requests"` // timed GET /v1/status listings
	CLIRuns     int        `json:"cli_runs"` // timed tend ps and tend status ID execs, each
	Cold        int        `json:"cold"`     // cold GET /v1/status and tend ps, each
	ColdGap     measure.Ms `json:"cold_gap_ms"`
	MemEvery    measure.Ms `json:"memory_every_ms"` // the memory watch's pace
	LoadRuns    int        `json:"load_runs"`       // timed config loads per shape
	Sweeps      int        `json:"sweeps"`          // timed sweeps of the groups' memory files
	Kills       int        `json:"kills"`
	Subscribers int        `json:"subscribers"`
	Notifies    int        `json:"notifies"`
	Gap         measure.Ms `json:"gap_ms"`
	UpTimeout   measure.Ms `json:"up_timeout_ms"` // the longest wait for a fleet to run
	Stall       measure.Ms `json:"stall_ms"`      // a start that gains no instance this long has stopped
	Program     string     `json:"program"`       // each instance's argv
}

// ConfigLoad is tend's config package loading a generated fleet config,
// in this process: parse and validate, as tend up does first.
type ConfigLoad struct {
	Programs  int          `json:"programs"`
	Instances int          `json:"instances"` // per program
	Bytes     int          `json:"bytes"`
	Samples   []measure.Ms `json:"samples_ms"`
}

// Fleet is one tend up on a generated config, from its start to its tend down.
type Fleet struct {
	Label     string `json:"label"`             // "plain", "plain, cgroup off", "max_rss", "max_rss, cgroup off", "agents"
	N         int    `json:"n"`                 // instances
	Programs  int    `json:"programs"`          //
	Instances int    `json:"instances"`         // per program
	Defaults  string `json:"defaults"`          // the [defaults] lines
	Cgroup    string `json:"cgroup"`            // [daemon] cgroup
	Tracking  string `json:"tracking"`          // as the status of an instance says
	Groups    string `json:"cgroups,omitempty"` // the daemon's cgroup tree (removed after tend down)
	Error     string `json:"error,omitempty"`

	Answered   measure.Ms     `json:"answered_ms"`    // start of tend up -> the API first answered
	AllRunning measure.Ms     `json:"all_running_ms"` // start of tend up -> all n running (0: never)
	Running    int            `json:"running"`        // running when the wait ended
	LastSpawn  measure.Ms     `json:"last_spawn_ms"`  // start of tend up -> the last spawned event's timestamp
	FirstTenth measure.Ms     `json:"first_tenth_ms"` // mean time between spawns, first tenth of them
	LastTenth  measure.Ms     `json:"last_tenth_ms"`  // and last tenth
	Polls      int            `json:"polls"`          // requests made while waiting
	StartCPU   measure.Ms     `json:"start_cpu_ms"`   // the daemon's CPU until all ran
	Spawned    int            `json:"spawned"`        // spawned events until then
	Failed     int            `json:"spawn_failed"`   // spawn_failed events until then
	Errnos     map[string]int `json:"spawn_failed_errnos,omitempty"`

	Floor *Floor `json:"floor,omitempty"` // a Go loop starting as many sleeps, just before tend up

	Idle CPUWindow    `json:"idle"`        // the daemon at rest
	Mem  Memory       `json:"memory"`      // at the end of the idle window
	Peak measure.Peak `json:"memory_peak"` // sampled from tend up to tend down

	StatusCold  []measure.Ms `json:"status_cold_ms,omitempty"`    // GET /v1/status, each the first request after a quiet -cold-gap
	PSCold      []measure.Ms `json:"tend_ps_cold_ms,omitempty"`   // tend ps likewise
	Status      []measure.Ms `json:"status_decoded_ms,omitempty"` // GET /v1/status through the Go client, decoded, back to back
	StatusRaw   []measure.Ms `json:"status_ms,omitempty"`         // the same, the body read and discarded
	StatusBytes int          `json:"status_bytes,omitempty"`
	PS          []measure.Ms `json:"tend_ps_ms,omitempty"`     // one tend ps exec each, back to back
	StatusCLI   []measure.Ms `json:"tend_status_ms,omitempty"` // one tend status ID exec each
	Hello       []measure.Ms `json:"hello_ms,omitempty"`       // a Go hello world exec, each right after one tend status ID

	DownCLI  measure.Ms `json:"down_cli_ms"`  // tend down: exec until it returned
	DownExit measure.Ms `json:"down_exit_ms"` // tend down exec until the daemon was reaped

	Notes []string `json:"daemon_notes,omitempty"` // lines tend up printed that are not events
}

// CPUWindow is a process's CPU use over a window.
type CPUWindow struct {
	Elapsed measure.Ms `json:"elapsed_ms"`
	Run     measure.Ms `json:"run_ms"` // schedstat run time summed over the threads
	Wakeups int64      `json:"wakeups"`
	Ticks   measure.Ms `json:"ticks_ms"`    // utime+stime from /proc/PID/stat, 10 ms steps
	Others  float64    `json:"others_cpus"` // CPUs kept busy meanwhile by everything but the daemon and the benchmark; -1 unknown
}

// percent is the run time as a percentage of one core.
func (w CPUWindow) percent() float64 {
	if w.Elapsed <= 0 {
		return 0
	}
	return 100 * float64(w.Run) / float64(w.Elapsed)
}

// Memory is the daemon's footprint, from /proc/PID/smaps_rollup, task and fd.
type Memory struct {
	PSS       int64          `json:"pss_bytes"`
	RSS       int64          `json:"rss_bytes"`
	PSSAnon   int64          `json:"pss_anon_bytes"`
	Threads   int            `json:"threads"`
	FDs       int            `json:"fds"`       // over every distinct descriptor table
	FDKinds   map[string]int `json:"fd_kinds"`  // socket, pipe, anon_inode:[eventpoll], file, ...
	FDTables  int            `json:"fd_tables"` // distinct tables (tend's epoll loops keep private ones)
	FDLargest int            `json:"fd_largest_table"`
}

// MemoryReads is the part of the max_rss watchdog that this machine lets
// us measure with cgroups: a sweep reading one memory.current-shaped file
// of every instance's group through a descriptor kept open, as
// cgroup.Group.MemoryCurrent does.
type MemoryReads struct {
	Groups      int          `json:"groups"`
	File        string       `json:"file"`         // memory.current where the controller is on, else a file shaped like it
	CPU         []measure.Ms `json:"sweep_cpu_ms"` // this thread's CPU per sweep
	Wall        []measure.Ms `json:"sweep_wall_ms"`
	NotMeasured string       `json:"not_measured,omitempty"`
}

// Events is the event daemon: the fan-out to SSE subscribers and the
// notify path.
type Events struct {
	Alone       []measure.Ms `json:"alone_ms"` // kill -> exited event at one subscriber
	Crowd       []measure.Ms `json:"crowd_ms"` // the same beside Subscribers more
	AloneCPU    CPUWindow    `json:"alone_daemon_cpu"`
	CrowdCPU    CPUWindow    `json:"crowd_daemon_cpu"`
	AloneSelf   measure.Ms   `json:"alone_self_cpu_ms"` // this process's CPU (the subscribers)
	CrowdSelf   measure.Ms   `json:"crowd_self_cpu_ms"`
	Subscribers int          `json:"subscribers"`
	Delivered   int          `json:"delivered"` // fewest events any extra subscriber received
	Published   int          `json:"published"` // events published while they were connected

	Notify         []measure.Ms `json:"notify_ms"`          // STATUS= sent -> the status API shows it
	NotifyRequests []measure.Ms `json:"notify_requests_ms"` // each GET /v1/status/{id}
	NotifyMissed   int          `json:"notify_missed"`      // messages overwritten before an answer showed them
}
