package program

import "time"

// Fine states of an instance (docs/status.md#state-and-lifecycle), supervisord's names.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateBackoff  = "backoff"
	StateStopping = "stopping"
	StateStopped  = "stopped"
	StateExited   = "exited"
	StateFatal    = "fatal"
)

// States is every fine state, in the order of an instance's life.
func States() []string {
	return []string{StateStarting, StateRunning, StateBackoff, StateStopping, StateStopped, StateExited, StateFatal}
}

// Coarse lifecycles (docs/status.md#state-and-lifecycle).
const (
	LifecycleRunning = "running"
	LifecycleIdle    = "idle"
	LifecycleDone    = "done"
	LifecycleError   = "error"
	LifecycleUnknown = "unknown" // only the answer for an id that does not exist
)

// Lifecycles is every lifecycle an instance can be in (LifecycleUnknown
// aside: no instance is ever in it).
func Lifecycles() []string {
	return []string{LifecycleRunning, LifecycleIdle, LifecycleDone, LifecycleError}
}

// Process tracking modes.
const (
	TrackingCgroup = "cgroup" // the members of the run's cgroup (docs/containment.md)
	TrackingGroup  = "group"
	TrackingTree   = "tree"
	TrackingNone   = "none"
)

// Restarts counts the ends of runs that were followed by a restart, by cause.
type Restarts struct {
	Crash           int `json:"crash"`
	CleanExit       int `json:"clean_exit"`
	RSSWatchdog     int `json:"rss_watchdog"`
	WedgeRestart    int `json:"wedge_restart"`
	OperatorRestart int `json:"operator_restart"`
}

// RestartCauses are the causes Restarts counts, in its fields' order: the
// keys of a status's restarts object.
func RestartCauses() []string {
	return []string{ReasonCrash, ReasonCleanExit, ReasonRSSWatchdog, ReasonWedgeRestart, ReasonOperatorRestart}
}

// Of is the count of one of RestartCauses; 0 for anything else.
func (r Restarts) Of(cause string) int {
	switch cause {
	case ReasonCrash:
		return r.Crash
	case ReasonCleanExit:
		return r.CleanExit
	case ReasonRSSWatchdog:
		return r.RSSWatchdog
	case ReasonWedgeRestart:
		return r.WedgeRestart
	case ReasonOperatorRestart:
		return r.OperatorRestart
	}
	return 0
}

// Total is the sum over every cause.
func (r Restarts) Total() int {
	return r.Crash + r.CleanExit + r.RSSWatchdog + r.WedgeRestart + r.OperatorRestart
}

// LastExit is the status's summary of the previous run's end.
type LastExit struct {
	Code        *int    `json:"code"`
	Signal      *string `json:"signal"`
	LikelyCause string  `json:"likely_cause"`
	At          Time    `json:"at"`
}

// Process is one member of a run's process tree.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	PGID     int    `json:"pgid"`
	Cmd      string `json:"cmd"`
	RSSBytes int64  `json:"rss_bytes"`
	State    string `json:"state"`
}

// Wedge is what the wedge watchdog found about the current run.
type Wedge struct {
	Source      string `json:"source"` // watchdog | idle_output | probe
	Detail      string `json:"detail"`
	At          Time   `json:"at"`
	PausedUntil Time   `json:"paused_until"` // wedge restarts paused by wedge_loop_budget until then
}

// Status is the one answer to "is this instance alive and what is it doing"
// (docs/status.md).
type Status struct {
	ID       string `json:"id"`
	Program  string `json:"program"`
	Instance int    `json:"instance"`
	Agent    bool   `json:"agent"`
	// Labels are the program's labels; {} when it has none. Read-only:
	// the map is the spec's own.
	Labels      map[string]string `json:"labels"`
	State       string            `json:"state"`
	Lifecycle   string            `json:"lifecycle"`
	PID         *int              `json:"pid"`
	Run         int               `json:"run"`
	StartedAt   Time              `json:"started_at"`
	UptimeMS    int64             `json:"uptime_ms"`
	Ready       bool              `json:"ready"`
	TurnActive  bool              `json:"turn_active"`
	StatusText  string            `json:"status_text"`
	CrashCount  int               `json:"crash_count"`
	Degraded    bool              `json:"degraded"`
	Restarts    Restarts          `json:"restarts"`
	LastExit    *LastExit         `json:"last_exit"`
	NextStartAt Time              `json:"next_start_at"`
	// TurnWaitUntil: an operator stop or restart waits for the agent's turn
	// to end until then (turn_grace, docs/operations.md#turn-aware-stop); absent otherwise.
	TurnWaitUntil *Time     `json:"turn_wait_until,omitempty"`
	Why           string    `json:"why"`
	RSSBytes      int64     `json:"rss_bytes"`
	MaxRSS        int64     `json:"max_rss"`        // the program's max_rss; 0 = no memory watchdog
	PeakRSS       int64     `json:"peak_rss_bytes"` // highest tree RSS sampled in this run
	Wedge         *Wedge    `json:"wedge"`          // the wedge watchdog's finding in this run, or null
	Processes     []Process `json:"processes"`
	Truncated     bool      `json:"truncated,omitempty"` // processes lists only the first of too many (a fork bomb)
	Tracking      string    `json:"tracking"`
	// SampledAt is when processes and rss_bytes were read: a single status
	// reads them as it is computed, a listing may answer from samples a few
	// seconds old (docs/status.md#processes-and-tracking). null without a run.
	SampledAt Time `json:"sampled_at"`
	TTY       *TTY `json:"tty,omitempty"` // a tty instance's terminal; absent without tty
	// Protocol agents (docs/protocol.md): the protocol, the session the
	// instance continues, the permission request it waits on (null when
	// none), and the lines of its stdout that were not the protocol.
	Protocol       string   `json:"protocol,omitempty"`
	SessionID      string   `json:"session_id,omitempty"`
	Waiting        *Waiting `json:"waiting,omitempty"`
	ProtocolErrors *int64   `json:"protocol_errors,omitempty"`
	ComputedAt     Time     `json:"computed_at"`
}

// Alive reports whether a run is in place (its process has not been reaped).
func (s *Status) Alive() bool { return s.PID != nil }

// Snapshot is what an instance's supervisor reports after every change. The
// broker keeps the latest one per instance and derives the rest of the Status
// (lifecycle, why, uptime, process tree) from it when asked.
type Snapshot struct {
	Status     Status           // the supervisor's own fields
	Spec       *Spec            // the spec the instance runs with (read-only)
	Backoff    *Backoff         // the pending backoff while in StateBackoff
	Stopping   string           // why a stop is under way: stop, restart, wedge, rss, start_timeout
	LastOutput func() time.Time // when the instance last wrote output (a tty instance: when its screen last changed)
	Turn       *bool            // set once the agent sent X_TEND_TURN: from then on the only authority on its turn
	TurnWait   time.Time        // an operator stop or restart waits for the agent's turn to end until then (docs/operations.md#turn-aware-stop)
	// Members, when set, reads the run's processes (its cgroup's, with
	// cgroups) as of asOf; a sample taken as of less than maxAge before asOf
	// may be reused. A listing passes its own start as asOf, so the samples
	// it takes age together and the next listings reuse all or none. Nil:
	// the broker finds them by the leader's process tree.
	Members func(asOf time.Time, maxAge time.Duration) Members
	// TTY, set for a tty instance, reads its terminal's part of the status
	// now (the screen changes without the supervisor knowing).
	TTY func() *TTY
	// Protocol, set for a protocol instance, reads what its connection
	// knows now (the open request, the count of bad lines); ProtocolWhy is
	// why the protocol ended the last run, when it did (fatal or a crash).
	Protocol    func() ProtocolReport
	ProtocolWhy string
}

// ProtocolReport is a protocol instance's connection as the status shows it.
type ProtocolReport struct {
	SessionID string
	Waiting   *Waiting
	Errors    int64
	Starting  string // what the connection waits for before it is ready ("" once ready)
}

// Members is a sample of a run's processes.
type Members struct {
	Procs     []Process
	Tracking  string    // TrackingCgroup, TrackingGroup, TrackingTree
	RSS       int64     // what the run holds: memory.current with the memory controller, else the members' sum
	Peak      int64     // memory.peak where the kernel keeps it, else 0
	Truncated bool      // Procs holds only the first of too many
	At        time.Time // when the sample was taken (as of)
}

// DefaultTurnIdleAfter is turn_idle_after's default (docs/config.md).
const DefaultTurnIdleAfter = 10 * time.Second

// TurnActive is an agent's turn (docs/status.md#agents-and-their-turns): what X_TEND_TURN last said once
// the agent sends it (turn non-nil), else whether it wrote output within
// idleAfter of now.
func TurnActive(turn *bool, lastOutput time.Time, idleAfter time.Duration, now time.Time) bool {
	if turn != nil {
		return *turn
	}
	return !lastOutput.IsZero() && now.Sub(lastOutput) < idleAfter
}
