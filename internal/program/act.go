package program

// ActOptions qualify an operator action (start, stop, restart) taken over
// the API (docs/cli.md, docs/api.md).
type ActOptions struct {
	// Wait: answer only once every instance is done: running (and ready,
	// with ready = "notify") or failed for start, every process gone for
	// stop, both for restart. The caller's context bounds the wait.
	Wait bool
	// Now: a stop or restart skips the wait for an agent's turn to end
	// (turn_grace, docs/operations.md#turn-aware-stop), also ending such a wait already under way.
	Now bool
	// Labels narrow what the selector names to the instances whose
	// program has every one of these labels (-l, ?label=).
	Labels LabelSelector
}

// ActResult answers an operator action.
type ActResult struct {
	IDs []string `json:"ids"` // the instances acted on, sorted
	// Statuses are those instances' statuses once done (with Wait only).
	Statuses []Status `json:"statuses,omitempty"`
	// Failed lists the instances that did not get there (with Wait only),
	// each with why: a failed start, a stop that timed out.
	Failed []ActFailure `json:"failed,omitempty"`
}

// ActFailure is one instance an action did not bring where it was asked.
type ActFailure struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// Readiness answers GET /readyz (docs/api.md#readyz): whether every instance that
// should run (autostart, not stopped by the operator, not done) is running
// and ready.
type Readiness struct {
	Ready     bool     `json:"ready"`
	Instances int      `json:"instances"`           // instances that should run
	ReadyN    int      `json:"ready_instances"`     // of those, running and ready
	NotReady  []string `json:"not_ready,omitempty"` // ids of the others (only to trusted callers)
	// Why: not ready for a reason of the daemon's own (the intent record
	// cannot be written: docs/daemon.md#when-the-disk-fills).
	Why string `json:"why,omitempty"`
}

// RemoveOptions qualify the removal of a program (tend rm, DELETE
// /v1/programs).
type RemoveOptions struct {
	// KeepLogs keeps the program's log files (tend rm --keep-logs);
	// otherwise they go with it, so a later program of the same name
	// starts with an empty log (docs/sessions.md).
	KeepLogs bool
}
