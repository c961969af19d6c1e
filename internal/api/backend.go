package api

import (
	"context"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// Backend is what the API serves: the daemon implements it. Errors wrap the
// sentinels in package program (ErrNotFound, ErrExists, ErrInvalid,
// ErrBadConfig, ErrStopping), which writeError maps to status codes.
type Backend interface {
	// List returns one consistent snapshot of every instance, sorted by id;
	// agentsOnly keeps the agents, and labels those whose program has
	// every one of them (an empty selector keeps all). Its process figures
	// may come from samples a few seconds old (each status's sampled_at);
	// written is to be called once the answer is written (the list is not
	// used after it), and refreshes them for the next call.
	List(agentsOnly bool, labels program.LabelSelector) (list Statuses, written func())
	// Status returns the instances a selector names, sorted: one for
	// "name:k", every instance of a bare name, every instance for "all";
	// of those, the ones labels match.
	Status(sel string, labels program.LabelSelector) ([]program.Status, error)
	// Add registers and (if autostart) starts a program; it returns its ids.
	// source is the request body it was parsed from, kept so the program
	// outlives a daemon restart (docs/daemon.md#after-a-crash).
	Add(spec program.Spec, source []byte) ([]string, error)
	// Remove stops every instance of the program and forgets it.
	Remove(ctx context.Context, name string, opts program.RemoveOptions) error
	// RemoveMatching removes every program (name "") or the program name,
	// of those whose labels match, and returns the names it removed.
	RemoveMatching(ctx context.Context, name string, labels program.LabelSelector, opts program.RemoveOptions) ([]string, error)
	// Start, Stop and Restart act on a selector ("all", "name", "name:k"),
	// narrowed by opts.Labels.
	// Without opts.Wait they return once the command is taken; with it,
	// once done (see program.ActOptions), or when ctx ends (the instances
	// not done by then are in Failed).
	Start(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error)
	Stop(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error)
	Restart(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error)
	// Scale sets a program's instance count; it returns the ids it has now.
	Scale(ctx context.Context, name string, instances int) ([]string, error)
	// Readiness says whether every instance that should run is running and
	// ready (GET /readyz).
	Readiness() program.Readiness
	// Reload re-reads the config file; a config with errors changes nothing
	// and returns an error wrapping program.ErrBadConfig with the messages.
	Reload() (ReloadResult, error)
	// Shutdown begins stopping the daemon; it returns at once.
	Shutdown()
	// Upgrade re-executes the daemon in place (tend upgrade), calling
	// handoff once it is about to exec. It returns only when the upgrade
	// did not happen, with the reason (a *StatusError says the status).
	Upgrade(ctx context.Context, handoff Handoff) error
	// LogSources returns the captured output of the instances a selector
	// names ("all", "name", "name:k") whose program labels match, sorted
	// by id.
	LogSources(sel string, labels program.LabelSelector) ([]logfile.Source, error)
	// Signal sends sig to the process group of each running instance sel
	// names (a client's Ctrl-C, proxied as docker run does) and returns
	// their ids; none running wraps program.ErrNotRunning.
	Signal(sel string, sig syscall.Signal) ([]string, error)
	// Hold keeps the log files of program name on disk until it is
	// released, also when the program is removed meanwhile
	// (remove_on_exit): an attached client reads them to the end first.
	// Taken before the program is added.
	Hold(name string) Hold
	// OutputSettled reports whether what the first run of instance id
	// wrote is all in its log: both of its streams have ended (the run and
	// every process it started are gone) and been written, or the instance
	// is gone (its output closed).
	OutputSettled(id string) bool
	// ParseProgram turns a POST /v1/programs body into a validated Spec.
	ParseProgram(body []byte) (program.Spec, error)
	// Doctor summarises the audit log of the last `since`.
	Doctor(since time.Duration) (*program.DoctorReport, error)
}

// Statuses is a listing: one consistent snapshot of instances whose
// statuses are derived one at a time, as the answer is written, so that a
// listing of ten thousand need not hold them all. Status may be called
// from several goroutines at once.
type Statuses interface {
	Len() int
	Status(i int) program.Status
}

// StatusSlice is the Statuses of statuses at hand.
type StatusSlice []program.Status

// Len is how many statuses there are.
func (s StatusSlice) Len() int { return len(s) }

// Status is the i-th.
func (s StatusSlice) Status(i int) program.Status { return s[i] }

// Hold is a hold on a program's log files (Backend.Hold).
type Hold interface {
	// Removed is closed once the program has been removed for having
	// ended (remove_on_exit): it is gone but for the files held.
	Removed() <-chan struct{}
	// Release lets go of the files; the last hold of a removed program
	// removes them before it returns. It may be called more than once.
	Release()
}

// ReloadResult says what a reload changed, by program name.
type ReloadResult struct {
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
}

// Events is the numbered event log the API serves.
type Events interface {
	// Since returns the events with seq > since, oldest first, at most limit
	// (0 = no limit), from the audit log.
	Since(since uint64, limit int) ([]program.Event, error)
	// Subscribe returns every event with seq > since, backlog first, then
	// live, without gaps or duplicates. The channel closes when the
	// subscription is cut off (a slow reader) or closed.
	Subscribe(since uint64) Subscription
	// LastSeq is the seq of the newest event.
	LastSeq() uint64
}

// Subscription is one live reader of the event log.
type Subscription interface {
	C() <-chan program.Event
	// CutOff reports whether the log dropped this reader for being slow.
	CutOff() bool
	Close()
}

// Terminals is the backend's side of tty instances (docs/terminal.md). The
// daemon implements it beside Backend; a Server without one answers the
// terminal routes with 501. Errors wrap program.ErrNotFound (404),
// program.ErrNotTerminal or program.ErrNotRunning (409) and
// program.ErrTooLarge (413).
type Terminals interface {
	// Screen returns the screen of a tty instance's current run, or of its
	// last run when none is in place (Running false); ansi fills ANSI too.
	Screen(id string, ansi bool, history int) (program.Screen, error)
	// Input types in into the terminal of each running tty instance the
	// selector names ("name:k", a bare name, "all") and returns their ids.
	// A name that names no running tty instance is an error.
	Input(sel string, in program.Input) ([]string, error)
	// Attach connects a client to a tty instance's terminal; readOnly
	// clients only watch (Write is refused).
	Attach(id string, readOnly bool) (program.Attach, error)
}
