package program

import "errors"

// Sentinel errors shared by the daemon, the API and the CLI; wrap them with
// %w and test with errors.Is.
var (
	ErrNotFound  = errors.New("no such program or instance") // API 404, CLI exit 3
	ErrExists    = errors.New("program already exists")      // API 409
	ErrInvalid   = errors.New("invalid request")             // API 400, CLI exit 2
	ErrBadConfig = errors.New("bad config")                  // API 400 on reload, CLI exit 2
	ErrStopping  = errors.New("daemon is shutting down")     // API 503
	// ErrAlreadyRunning: another daemon holds the state directory (tend
	// up says so as it is, exit 1).
	ErrAlreadyRunning = errors.New("a tend daemon is already running")
	// ErrResources marks a spawn that failed for want of the daemon's own
	// resources (a cgroup it could not make, descriptors, memory): the
	// daemon_resources rule of docs/restarts.md#daemon-resources, never the program's crash.
	ErrResources = errors.New("the daemon is short of resources")
	// ErrNotKept marks a decision the daemon could not journal in its
	// state directory (a full disk, an I/O error): it was refused and
	// changed nothing. API 507 when the disk is full, else 503.
	ErrNotKept = errors.New("not journaled, so not done")
)
