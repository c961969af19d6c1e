package program

// DoctorReport is tend doctor's summary of the audit log over a period.
type DoctorReport struct {
	Since    Time             `json:"since"`
	Until    Time             `json:"until"`
	Events   int              `json:"events"`
	Programs []*DoctorProgram `json:"programs"` // the most troubled first
	Advice   []string         `json:"advice"`   // one line per kind of trouble
	// Tracking is how the daemon tracks its runs now: TrackingCgroup or
	// TrackingGroup (docs/containment.md); TrackingWhy says why not cgroups, or what
	// they lack.
	Tracking    string `json:"tracking"`
	TrackingWhy string `json:"tracking_why,omitempty"`
}

// DoctorProgram is one program's part of a DoctorReport.
type DoctorProgram struct {
	Program     string         `json:"program"`
	Exits       map[string]int `json:"exits"`    // by likely_cause
	Warnings    map[string]int `json:"warnings"` // health_warn by reason
	Wedges      map[string]int `json:"wedges"`   // wedged by source
	GaveUp      int            `json:"gave_up"`
	SpawnErrors []string       `json:"spawn_errors,omitempty"` // distinct, at most 3
	LastCrash   string         `json:"last_crash,omitempty"`   // "exit 1 (runtime_error) on worker:0"
	LastID      string         `json:"last_id,omitempty"`
}
