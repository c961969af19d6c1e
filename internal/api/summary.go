package api

import "github.com/tend-sh/tend/internal/program"

// summary is a status as `tend ps` shows it (GET /v1/status?view=summary):
// the same field names, without the process tree and the fields a table
// leaves out, so a thousand instances cost a third of the bytes to send and
// to decode.
type summary struct {
	ID         string           `json:"id"`
	Program    string           `json:"program"`
	Instance   int              `json:"instance"`
	Agent      bool             `json:"agent"`
	State      string           `json:"state"`
	Lifecycle  string           `json:"lifecycle"`
	PID        *int             `json:"pid"`
	Run        int              `json:"run"`
	UptimeMS   int64            `json:"uptime_ms"`
	CrashCount int              `json:"crash_count"`
	Degraded   bool             `json:"degraded"`
	Restarts   program.Restarts `json:"restarts"`
	Why        string           `json:"why"`
	RSSBytes   int64            `json:"rss_bytes"`
}

func summarize(list []program.Status) []summary {
	out := make([]summary, len(list))
	for i := range list {
		s := &list[i]
		out[i] = summary{
			ID: s.ID, Program: s.Program, Instance: s.Instance, Agent: s.Agent, State: s.State,
			Lifecycle: s.Lifecycle, PID: s.PID, Run: s.Run, UptimeMS: s.UptimeMS, CrashCount: s.CrashCount,
			Degraded: s.Degraded, Restarts: s.Restarts, Why: s.Why, RSSBytes: s.RSSBytes,
		}
	}
	return out
}
