package program

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Event kinds (docs/events.md#kinds); Kinds lists them.
const (
	KindSpawned        = "spawned"
	KindSpawnFailed    = "spawn_failed"
	KindExited         = "exited"
	KindBackoff        = "backoff"
	KindHealthWarn     = "health_warn"
	KindWedged         = "wedged"
	KindRSSExceeded    = "rss_exceeded"
	KindGaveUp         = "gave_up"
	KindStatusChanged  = "status_changed"
	KindTrackedChanged = "tracked_changed"
	KindDaemon         = "daemon"
)

// Backoff reasons.
const (
	ReasonWedgeRestart    = "wedge_restart"
	ReasonOperatorRestart = "operator_restart"
	ReasonRSSWatchdog     = "rss_watchdog"
	ReasonCleanExit       = "clean_exit"
	ReasonBudgetExceeded  = "budget_exceeded"
	ReasonCrash           = "crash"
	ReasonDaemonResources = "daemon_resources" // a spawn the daemon could not make: retried on the crash curve
)

// Health warnings.
const (
	WarnCleanBudget      = "clean_restart_budget_exceeded"
	WarnRSSLoop          = "rss_watchdog_loop"
	WarnCrashDegraded    = "crash_budget_degraded"
	WarnWedgeRestartLoop = "wedge_restart_loop"
	WarnDaemonResources  = "daemon_resources"   // count: consecutive spawns the daemon could not make
	WarnTurnGrace        = "turn_grace_expired" // an agent was stopped mid-turn after turn_grace
)

// Daemon phases.
const (
	PhaseStarted  = "started"
	PhaseReloaded = "reloaded"
	PhaseStopping = "stopping"
	PhaseStopped  = "stopped"
	PhaseAdopted  = "adopted"
	PhaseUpgraded = "upgraded" // the daemon re-executed itself in place (tend upgrade), from one version to another
	// PhaseDegradedStorage: the state directory could not be written for a
	// while and now can (docs/events.md#degraded_storage): what was lost.
	PhaseDegradedStorage = "degraded_storage"
	// PhaseKeeperReplaced: the keeper that holds tty runs' terminals
	// died (PID) and another (Keeper) was started and handed Count of
	// them again (docs/terminal.md#a-keeper-that-dies).
	PhaseKeeperReplaced = "keeper_replaced"
)

// TimeFormat is how every timestamp is written: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Time is a timestamp that marshals as TimeFormat in UTC.
type Time struct{ time.Time }

// MarshalJSON writes TimeFormat; the zero time is null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	// One allocation: a listing of ten thousand statuses writes four each.
	b := make([]byte, 0, len(TimeFormat)+4)
	b = t.UTC().AppendFormat(append(b, '"'), TimeFormat)
	return append(b, '"'), nil
}

// UnmarshalJSON reads any RFC 3339 time or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	t.Time = v
	return err
}

// Event is one numbered event. Data holds the kind's own fields as one of the
// payload types below; on the wire they sit beside the common fields.
type Event struct {
	Seq     uint64
	TS      time.Time
	Kind    string
	ID      string // the instance, when the event concerns one
	Program string
	// Labels are the program's labels, on the events of an instance of a
	// labelled program (in status_changed, the status object carries them).
	// Read-only.
	Labels map[string]string
	Data   any
	// JSON is the event as the event log encoded it, so that a hundred
	// readers of one event do not encode it a hundred times. Read-only; nil
	// for an event not (yet) numbered by the log.
	JSON []byte
}

type eventHead struct {
	Seq     uint64            `json:"seq"`
	TS      Time              `json:"ts"`
	Kind    string            `json:"kind"`
	ID      string            `json:"id,omitempty"`
	Program string            `json:"program,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Payloads, one per kind.
type (
	Spawned struct {
		PID int `json:"pid"`
		Run int `json:"run"`
	}
	SpawnFailed struct {
		Error string `json:"error"`
		Errno string `json:"errno"` // "ENOENT"; "" when the error has no errno
	}
	Exited struct {
		PID           int     `json:"pid"`
		Code          *int    `json:"code"`
		Signal        *string `json:"signal"`
		RunDurationMS int64   `json:"run_duration_ms"`
		LikelyCause   string  `json:"likely_cause"`
		CrashCount    int     `json:"crash_count"`
		MaxRSSBytes   int64   `json:"max_rss_bytes"`
	}
	Backoff struct {
		MS         int64  `json:"ms"`
		CrashCount int    `json:"crash_count"`
		Reason     string `json:"reason"`
	}
	HealthWarn struct {
		Reason   string `json:"reason"`
		Count    int    `json:"count"`
		WindowMS int64  `json:"window_ms,omitempty"`
		Max      int    `json:"max,omitempty"`
	}
	Wedged struct {
		Source string `json:"source"`
		Detail string `json:"detail"`
	}
	RSSExceeded struct {
		RSSBytes int64 `json:"rss_bytes"`
		MaxRSS   int64 `json:"max_rss"`
	}
	GaveUp struct {
		CrashCount int `json:"crash_count"`
		Max        int `json:"max"`
	}
	// TrackedChanged says which instances came and went (each list in id
	// order, never null) and how many there are now.
	TrackedChanged struct {
		Added   []string `json:"added"`
		Removed []string `json:"removed"`
		Count   int      `json:"count"`
	}
	DaemonPhase struct {
		Phase string `json:"phase"`
		PID   int    `json:"pid,omitempty"`
		Count *int   `json:"count,omitempty"` // adopted runs, with PhaseAdopted; terminals handed again, with PhaseKeeperReplaced
		// With PhaseKeeperReplaced: the new keeper's pid (PID is the one
		// that died); none when it could not be started (Error says why).
		Keeper int `json:"keeper,omitempty"`
		// With PhaseUpgraded: the version of the binary that ran before
		// and of the one that runs now (tend version's).
		From string `json:"from,omitempty"`
		To   string `json:"to,omitempty"`
		// With PhaseStarted: how runs are tracked (TrackingCgroup, or
		// TrackingGroup when cgroups are not used) and why, or what the
		// cgroups lack (docs/events.md, docs/containment.md).
		Tracking    string `json:"tracking,omitempty"`
		TrackingWhy string `json:"tracking_why,omitempty"`
		// With PhaseDegradedStorage: either the seqs of the events the
		// audit log could not keep (LostFrom to LostTo, both included),
		// or a file of the state directory (File, under it) that could
		// not be written from Since until this event, with Errors failed
		// writes; and Error, the last error.
		LostFrom uint64 `json:"lost_from,omitempty"`
		LostTo   uint64 `json:"lost_to,omitempty"`
		File     string `json:"file,omitempty"`
		Errors   uint64 `json:"errors,omitempty"`
		Since    *Time  `json:"since,omitempty"`
		Error    string `json:"error,omitempty"`
	}
)

// kinds lists every event kind once, in the contract's order, with a
// fresh payload of its type for decoding. Everything else that needs the
// list (the CLI's formatting, the dashboard's subscription) reads Kinds.
var kinds = []struct {
	name    string
	payload func() any
}{
	{KindSpawned, func() any { return &Spawned{} }},
	{KindSpawnFailed, func() any { return &SpawnFailed{} }},
	{KindExited, func() any { return &Exited{} }},
	{KindBackoff, func() any { return &Backoff{} }},
	{KindHealthWarn, func() any { return &HealthWarn{} }},
	{KindWedged, func() any { return &Wedged{} }},
	{KindRSSExceeded, func() any { return &RSSExceeded{} }},
	{KindGaveUp, func() any { return &GaveUp{} }},
	{KindStatusChanged, func() any { return &Status{} }},
	{KindTrackedChanged, func() any { return &TrackedChanged{} }},
	{KindTurn, func() any { return &Turn{} }},
	{KindPermission, func() any { return &Permission{} }},
	{KindDaemon, func() any { return &DaemonPhase{} }},
}

// Kinds is every event kind, in the contract's order.
func Kinds() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

// payloadFor returns a fresh payload for kind, for decoding: a
// *map[string]any for a kind this build does not know.
func payloadFor(kind string) any {
	for _, k := range kinds {
		if k.name == kind {
			return k.payload()
		}
	}
	return &map[string]any{}
}

// MarshalJSON writes one flat object: the common fields, then the payload's.
func (e Event) MarshalJSON() ([]byte, error) {
	h := eventHead{e.Seq, Time{e.TS}, e.Kind, e.ID, e.Program, e.Labels}
	if e.Kind == KindStatusChanged {
		h.ID, h.Program, h.Labels = "", "", nil // the status object carries them
	}
	head, err := json.Marshal(h)
	if err != nil || e.Data == nil {
		return head, err
	}
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' {
		return nil, fmt.Errorf("event %s: payload %T is not an object", e.Kind, e.Data)
	}
	if len(data) == 2 { // {}
		return head, nil
	}
	out := make([]byte, 0, len(head)+len(data))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	return append(out, data[1:]...), nil
}

// UnmarshalJSON reads the flat form back, with Data a pointer to the kind's
// payload type (a *map[string]any for a kind this build does not know).
func (e *Event) UnmarshalJSON(b []byte) error {
	var h eventHead
	if err := json.Unmarshal(b, &h); err != nil {
		return err
	}
	p := payloadFor(h.Kind)
	if err := json.Unmarshal(b, p); err != nil {
		return fmt.Errorf("event %d (%s): %w", h.Seq, h.Kind, err)
	}
	*e = Event{Seq: h.Seq, TS: h.TS.Time, Kind: h.Kind, ID: h.ID, Program: h.Program, Labels: h.Labels, Data: p}
	return nil
}

// LabelSet is the labels of the program the event concerns: its own, or
// those of the status a status_changed carries.
func (e *Event) LabelSet() map[string]string {
	if st, ok := e.Data.(*Status); ok && e.Kind == KindStatusChanged {
		return st.Labels
	}
	return e.Labels
}
