// Package apitest provides an in-memory Backend and Events for testing the
// API, the client and the CLI against a real api.Server without a daemon.
// They keep just enough state to answer like the daemon would: programs with
// instances, operator actions recorded as calls, a numbered event log with
// live subscribers.
package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// Backend is a fake api.Backend. The zero value is not usable; use
// NewBackend. Its exported fields may be set before serving.
type Backend struct {
	// LogDir holds each instance's log as LogDir/ID.log.
	LogDir string
	// ReloadResult and ReloadErr are what Reload returns.
	ReloadResult api.ReloadResult
	ReloadErr    error
	// UpgradeErr is what Upgrade returns, after the handoff when
	// UpgradeHandoff is set.
	UpgradeErr     error
	UpgradeHandoff bool
	// OnShutdown, if set, runs (in its own goroutine) when Shutdown is called.
	OnShutdown func()
	// OnListWritten, if set, is List's written: called once a listing's
	// answer is written.
	OnListWritten func()
	// WaitDelay is how long an action with Wait takes to be done; a
	// context that ends first (?timeout=D) leaves every instance in Failed.
	WaitDelay time.Duration
	// TTY names the instances whose log sources say they run in a terminal.
	TTY map[string]bool

	mu       sync.Mutex                // guards the fields below
	statuses map[string]program.Status // by instance id
	calls    []string                  // "start worker", "stop all", ...
	logs     map[string]*logfile.Log   // by instance id, made on first use
	fail     map[string]string         // instance id -> why its start fails
	nextPID  int                       // the pid of the next fake run
	holds    map[string]int            // program name -> Hold calls not released
	removed  map[string]chan struct{}  // program name -> closed by its Remove, for holds
	added    map[string][]byte         // program name -> the body it was added with
	// newTTY, set by NewTerminals, gives each instance of a program added
	// with tty = true a terminal (called without mu held).
	newTTY func(id string)
}

// NewBackend returns an empty Backend whose logs live in logDir.
func NewBackend(logDir string) *Backend {
	return &Backend{LogDir: logDir, statuses: map[string]program.Status{}, fail: map[string]string{}, nextPID: 5000,
		holds: map[string]int{}, added: map[string][]byte{}, removed: map[string]chan struct{}{}}
}

// FailStart makes every later start (or restart) of instance id fail with
// why: the instance ends in backoff, and an action with Wait lists it in
// Failed. An empty why clears it.
func (b *Backend) FailStart(id, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if why == "" {
		delete(b.fail, id)
		return
	}
	b.fail[id] = why
}

// Put adds or replaces the status of one instance.
func (b *Backend) Put(st program.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.statuses[st.ID] = st
}

// Calls returns the operator actions so far, as "verb selector" strings.
func (b *Backend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// List implements api.Backend.
func (b *Backend) List(agentsOnly bool, labels program.LabelSelector) (api.Statuses, func()) {
	written := b.OnListWritten
	if written == nil {
		written = func() {}
	}
	return api.StatusSlice(b.list(agentsOnly, labels)), written
}

func (b *Backend) list(agentsOnly bool, labels program.LabelSelector) []program.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []program.Status
	for _, st := range b.statuses {
		if (!agentsOnly || st.Agent) && labels.Matches(st.Labels) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b program.Status) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Status implements api.Backend.
func (b *Backend) Status(sel string, labels program.LabelSelector) ([]program.Status, error) {
	ids, err := b.resolve(sel)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]program.Status, 0, len(ids))
	for _, id := range ids {
		if labels.Matches(b.statuses[id].Labels) {
			out = append(out, b.statuses[id])
		}
	}
	return out, nil
}

// Add implements api.Backend: each instance starts out stopped, or with
// tty = true and Terminals, running with a terminal.
func (b *Backend) Add(spec program.Spec, source []byte) ([]string, error) {
	ids, err := b.add(spec, source)
	if err == nil && spec.Tty && b.newTTY != nil {
		for _, id := range ids {
			b.newTTY(id)
		}
	}
	return ids, err
}

func (b *Backend) add(spec program.Spec, source []byte) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hasProgramLocked(spec.Name) {
		return nil, fmt.Errorf("%w: %s", program.ErrExists, spec.Name)
	}
	var ids []string
	for k := range spec.Instances {
		id := program.InstanceID(spec.Name, k)
		b.statuses[id] = program.Status{
			ID: id, Program: spec.Name, Instance: k, Agent: spec.Agent, Labels: spec.Labels,
			State: program.StateStopped, Lifecycle: program.LifecycleDone,
			Tracking: program.TrackingNone,
		}
		ids = append(ids, id)
	}
	b.added[spec.Name] = slices.Clone(source)
	return ids, nil
}

func (b *Backend) hasProgramLocked(name string) bool {
	for _, st := range b.statuses {
		if st.Program == name {
			return true
		}
	}
	return false
}

// Remove implements api.Backend.
func (b *Backend) Remove(ctx context.Context, name string, _ program.RemoveOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.hasProgramLocked(name) {
		return fmt.Errorf("%w: %s", program.ErrNotFound, name)
	}
	for id, st := range b.statuses {
		if st.Program == name {
			delete(b.statuses, id)
		}
	}
	if ch, ok := b.removed[name]; ok {
		close(ch)
		delete(b.removed, name)
	}
	b.calls = append(b.calls, "remove "+name)
	return nil
}

// Start implements api.Backend.
func (b *Backend) Start(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.act(ctx, "start", sel, opts)
}

// Stop implements api.Backend.
func (b *Backend) Stop(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.act(ctx, "stop", sel, opts)
}

// Restart implements api.Backend.
func (b *Backend) Restart(ctx context.Context, sel string, opts program.ActOptions) (program.ActResult, error) {
	return b.act(ctx, "restart", sel, opts)
}

// Scale implements api.Backend: it records the call, adds running
// instances up to n and removes the ones from n on.
func (b *Backend) Scale(ctx context.Context, name string, n int) ([]string, error) {
	if _, err := b.resolve(name); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf("scale %s %d", name, n))
	var proto program.Status
	for id, st := range b.statuses {
		if st.Program == name {
			proto = st
			if st.Instance >= n {
				delete(b.statuses, id)
			}
		}
	}
	ids := make([]string, n)
	for k := range ids {
		ids[k] = program.InstanceID(name, k)
		if _, ok := b.statuses[ids[k]]; !ok {
			b.statuses[ids[k]] = program.Status{ID: ids[k], Program: name, Instance: k, Agent: proto.Agent, Tracking: program.TrackingNone}
			b.doLocked("start", ids[k])
		}
	}
	return ids, nil
}

// Readiness implements api.Backend: running instances are ready; stopped
// ones do not count.
func (b *Backend) Readiness() program.Readiness {
	var r program.Readiness
	for _, st := range b.list(false, nil) {
		if st.State == program.StateStopped || st.State == program.StateExited {
			continue
		}
		r.Instances++
		if st.State == program.StateRunning {
			r.ReadyN++
		} else {
			r.NotReady = append(r.NotReady, st.ID)
		}
	}
	r.Ready = r.ReadyN == r.Instances
	return r
}

// act records an operator action ("start worker", "restart all?wait") and
// does it at once: start makes each instance running with a new pid (or
// backoff, for one set to FailStart), stop makes it stopped, restart both.
// With Wait it first takes WaitDelay (or until ctx ends: then every
// instance is in Failed), and answers the statuses and failures.
func (b *Backend) act(ctx context.Context, verb, sel string, opts program.ActOptions) (program.ActResult, error) {
	ids, err := b.resolve(sel)
	if err != nil {
		return program.ActResult{}, err
	}
	if len(opts.Labels) > 0 {
		b.mu.Lock()
		ids = slices.DeleteFunc(ids, func(id string) bool { return !opts.Labels.Matches(b.statuses[id].Labels) })
		b.mu.Unlock()
	}
	call := verb + " " + sel
	if len(opts.Labels) > 0 {
		call += "?label=" + opts.Labels.String()
	}
	if opts.Wait {
		call += "?wait"
	}
	if opts.Now {
		call += "?now"
	}
	b.mu.Lock()
	b.calls = append(b.calls, call)
	b.mu.Unlock()
	res := program.ActResult{IDs: ids}
	if opts.Wait && b.WaitDelay > 0 {
		t := time.NewTimer(b.WaitDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			for _, id := range ids {
				res.Failed = append(res.Failed, program.ActFailure{ID: id, Why: "not done when the wait ended: " + ctx.Err().Error()})
			}
			return res, nil
		case <-t.C:
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		why := b.doLocked(verb, id)
		if !opts.Wait {
			continue
		}
		res.Statuses = append(res.Statuses, b.statuses[id])
		if why != "" {
			res.Failed = append(res.Failed, program.ActFailure{ID: id, Why: why})
		}
	}
	return res, nil
}

// doLocked moves one instance as verb asks; it returns why a start failed.
func (b *Backend) doLocked(verb, id string) string {
	st := b.statuses[id]
	if verb == "stop" || verb == "restart" {
		st.State, st.Lifecycle, st.PID, st.Ready, st.Why = program.StateStopped, program.LifecycleDone, nil, false, "stopped by the operator"
	}
	why := ""
	if verb == "start" || verb == "restart" {
		if why = b.fail[id]; why != "" {
			st.State, st.Lifecycle, st.PID, st.Ready, st.Why = program.StateBackoff, program.LifecycleError, nil, false, why
		} else {
			b.nextPID++
			pid := b.nextPID
			st.State, st.Lifecycle, st.PID, st.Ready, st.Why = program.StateRunning, program.LifecycleRunning, &pid, true, "up 0s"
			st.Run++
		}
	}
	b.statuses[id] = st
	return why
}

// resolve returns the ids sel names, sorted.
func (b *Backend) resolve(sel string) ([]string, error) {
	s, err := program.ParseSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", program.ErrNotFound, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id, st := range b.statuses {
		if s.All || (st.Program == s.Program && (s.Instance < 0 || s.Instance == st.Instance)) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 && !s.All {
		return nil, fmt.Errorf("%w: %s", program.ErrNotFound, sel)
	}
	slices.Sort(ids)
	return ids, nil
}

// Reload implements api.Backend.
func (b *Backend) Reload() (api.ReloadResult, error) { return b.ReloadResult, b.ReloadErr }

// Shutdown implements api.Backend.
func (b *Backend) Shutdown() {
	b.mu.Lock()
	b.calls = append(b.calls, "shutdown")
	b.mu.Unlock()
	if b.OnShutdown != nil {
		go b.OnShutdown()
	}
}

// Upgrade implements api.Backend: the fake has no binary to exec, so it
// answers UpgradeErr (or refuses), having called the handoff when
// UpgradeHandoff is set (the answer is then written on the connection).
func (b *Backend) Upgrade(ctx context.Context, handoff api.Handoff) error {
	b.mu.Lock()
	b.calls = append(b.calls, "upgrade")
	b.mu.Unlock()
	if b.UpgradeHandoff {
		fd, err := handoff("v1", "v2")
		if err != nil {
			return err
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if b.UpgradeErr != nil {
		return b.UpgradeErr
	}
	return &api.StatusError{Code: 501, Err: fmt.Errorf("this fake cannot re-execute itself")}
}

// LogSources implements api.Backend: instance ID's log is the file
// LogDir/ID.log (with its rotated ID.log.N), read as it is on disk, so a
// test may write lines there directly or through Log.
func (b *Backend) LogSources(sel string, labels program.LabelSelector) ([]logfile.Source, error) {
	sts, err := b.Status(sel, labels)
	if err != nil {
		return nil, err
	}
	out := make([]logfile.Source, 0, len(sts))
	for _, st := range sts {
		id := st.ID
		l, err := b.Log(id)
		if err != nil {
			return nil, err
		}
		out = append(out, logfile.Source{ID: id, Log: l, TTY: b.TTY[id]})
	}
	return out, nil
}

// Log returns the log of instance id, for a test to write records to.
func (b *Backend) Log(id string) (*logfile.Log, error) {
	dir, err := logDir(b.LogDir)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logs == nil {
		b.logs = map[string]*logfile.Log{}
	}
	l := b.logs[id]
	if l == nil {
		l = logfile.New(dir, id, logfile.Options{MaxSize: 1 << 20, MaxFiles: 2})
		b.logs[id] = l
	}
	return l, nil
}

// logDirs holds one open directory per LogDir for the life of the test
// binary: fakes come and go by the thousand under a fuzzer, their
// directories do not.
var logDirs sync.Map // path → *statedir.Dir

func logDir(path string) (*statedir.Dir, error) {
	if d, ok := logDirs.Load(path); ok {
		return d.(*statedir.Dir), nil
	}
	d, err := statedir.Open(path)
	if err != nil {
		return nil, err
	}
	if prev, loaded := logDirs.LoadOrStore(path, d); loaded {
		d.Close()
		return prev.(*statedir.Dir), nil
	}
	return d, nil
}

// ParseProgram implements api.Backend for the keys the CLI sends: name,
// command, shell, instances, agent, restart, labels, env, cwd,
// remove_on_exit, autostart, tty, protocol and permission. Other keys are an error, as
// the daemon rejects unknown keys.
func (b *Backend) ParseProgram(body []byte) (program.Spec, error) {
	var req struct {
		Name         string            `json:"name"`
		Command      []string          `json:"command"`
		Shell        string            `json:"shell"`
		Instances    *int              `json:"instances"`
		Agent        bool              `json:"agent"`
		Restart      string            `json:"restart"`
		Labels       map[string]string `json:"labels"`
		Env          map[string]string `json:"env"`
		Cwd          string            `json:"cwd"`
		RemoveOnExit bool              `json:"remove_on_exit"`
		Autostart    *bool             `json:"autostart"`
		Tty          bool              `json:"tty"`
		Protocol     string            `json:"protocol"`
		Permission   string            `json:"permission"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return program.Spec{}, fmt.Errorf("%w: %w", program.ErrInvalid, err)
	}
	spec := program.Spec{Name: req.Name, Command: req.Command, Shell: req.Shell,
		Instances: 1, Agent: req.Agent, Restart: program.RestartAlways, Autostart: true,
		Labels: req.Labels, Env: req.Env, Cwd: req.Cwd, RemoveOnExit: req.RemoveOnExit, Tty: req.Tty,
		Protocol: req.Protocol, Permission: req.Permission}
	if req.Autostart != nil {
		spec.Autostart = *req.Autostart
	}
	if errs := program.CheckLabels(spec.Labels); errs != nil {
		return spec, fmt.Errorf("%w: %w", program.ErrInvalid, errs[0])
	}
	if req.Instances != nil {
		spec.Instances = *req.Instances
	}
	if req.Restart != "" {
		spec.Restart = req.Restart
	}
	switch {
	case !program.NamePattern.MatchString(spec.Name):
		return spec, fmt.Errorf("%w: name: %q does not match %s", program.ErrInvalid, spec.Name, program.NamePattern)
	case len(spec.Command) == 0 && spec.Shell == "":
		return spec, fmt.Errorf("%w: command: required", program.ErrInvalid)
	case spec.Instances < 0:
		return spec, fmt.Errorf("%w: instances: must be >= 0", program.ErrInvalid)
	case !slices.Contains([]string{program.RestartAlways, program.RestartOnFailure, program.RestartNever}, spec.Restart):
		return spec, fmt.Errorf("%w: restart: %q is not always, on-failure or never", program.ErrInvalid, spec.Restart)
	}
	return spec, nil
}

// Doctor answers with a report of the fake's fixed period and no events.
func (b *Backend) Doctor(since time.Duration) (*program.DoctorReport, error) {
	until := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	return &program.DoctorReport{
		Since: program.Time{Time: until.Add(-since)}, Until: program.Time{Time: until},
		Programs: []*program.DoctorProgram{}, Advice: []string{},
	}, nil
}
