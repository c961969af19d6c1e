package daemon

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
)

// Sessions: agents started on demand. A program added with remove_on_exit
// (tend run --rm) is removed once every instance of it has ended and will
// not restart (exited, fatal, or stopped by the operator), here in the
// daemon, whether or not a client still watches: its instances go (and
// with them their cgroups, FIFOs, notify sockets and runs.json records), it
// leaves programs.json, and its log files are removed, so it leaves
// nothing behind. An attached client (POST /v1/programs?attach=1) holds
// the logs until it has read them to the end.
//
// The supervisors report every change through the broker's Update, which
// the daemon taps (observe): that is on an instance's goroutine, sometimes
// under the manager's lock, so it only notes the program and wakes run,
// the one goroutine that looks and removes.
type sessions struct {
	d        *daemon
	kick     chan struct{}  // capacity 1: due has names
	stopped  chan struct{}  // closed by stop: no removal starts after it
	inFlight sync.WaitGroup // removals under way

	mu       sync.Mutex           // guards due, removing, logs and closed
	closed   bool                 // stop was called
	due      map[string]bool      // programs with an instance that came to rest, to look at
	removing map[string]bool      // removals under way
	logs     map[string]*logHolds // programs whose logs are held or to be removed
	idle     *sync.Cond           // signalled when a hold is released (a shutdown waits for them)
}

func newSessions(d *daemon) *sessions {
	s := &sessions{d: d, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		due: map[string]bool{}, removing: map[string]bool{}, logs: map[string]*logHolds{}}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// update is the supervisors' Update: the broker's, tapped for sessions.
func (d *daemon) update(snap program.Snapshot) {
	d.broker.Update(snap)
	d.sessions.observe(&snap)
}

// observe notes a remove_on_exit program whose instance came to rest. It
// must not block, nor take the manager's lock.
func (s *sessions) observe(snap *program.Snapshot) {
	if snap.Spec == nil || !snap.Spec.RemoveOnExit || !instanceEnded(&snap.Status) {
		return
	}
	s.mu.Lock()
	s.due[snap.Spec.Name] = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// instanceEnded says an instance has ended and will not start again by itself:
// exited or fatal, or stopped after having run (a stopped instance with no
// last exit is one not started yet).
func instanceEnded(st *program.Status) bool {
	if st.PID != nil {
		return false
	}
	switch st.State {
	case program.StateExited, program.StateFatal:
		return true
	case program.StateStopped:
		return st.LastExit != nil
	}
	return false
}

// run removes the due programs whose every instance has ended, until
// stop.
func (s *sessions) run() {
	for {
		select {
		case <-s.stopped:
			return
		case <-s.kick:
		}
		s.mu.Lock()
		names := make([]string, 0, len(s.due))
		for name := range s.due {
			if !s.removing[name] {
				names = append(names, name)
				delete(s.due, name)
			}
		}
		s.mu.Unlock()
		for _, name := range names {
			if !s.allEnded(name) {
				continue
			}
			s.mu.Lock()
			if s.closed { // stop came meanwhile: the shutdown removes it
				s.mu.Unlock()
				return
			}
			s.removing[name] = true
			s.inFlight.Add(1) // under mu, so never after stop's Wait began
			s.mu.Unlock()
			go func() {
				defer s.inFlight.Done()
				s.remove(name)
			}()
		}
	}
}

// stop ends run and waits for the removals under way: the shutdown that
// follows removes every program itself (endSessions).
func (s *sessions) stop() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stopped)
	}
	s.mu.Unlock()
	s.inFlight.Wait()
}

// allEnded says whether every instance of program name has ended.
func (s *sessions) allEnded(name string) bool {
	spec, ok := s.d.mgr.Spec(name)
	if !ok || !spec.RemoveOnExit {
		return false // gone already, or replaced by a program that stays
	}
	ids, err := s.d.mgr.Resolve(name)
	if err != nil {
		return false
	}
	for _, id := range ids {
		b, ok := s.d.broker.Brief(id)
		if !ok || b.Alive {
			return false
		}
		st := program.Status{State: b.State}
		if b.Ended {
			st.LastExit = &program.LastExit{}
		}
		if !instanceEnded(&st) {
			return false
		}
	}
	return true
}

// remove removes a program whose run is over, then its logs.
func (s *sessions) remove(name string) {
	defer func() {
		s.mu.Lock()
		delete(s.removing, name)
		s.mu.Unlock()
	}()
	if err := s.d.removeAndForget(context.Background(), name, program.RemoveOptions{}); err != nil && !errors.Is(err, program.ErrNotFound) {
		s.d.note("removing %s (remove_on_exit): %v", name, err)
	}
}

// removeAndForget is tend rm, which also removes the program's log files
// (at once, or when the last attached reader lets go of them) unless
// opts.KeepLogs, and always for a remove_on_exit program: such a program
// leaves nothing behind however it goes, and a later program of the same
// name starts with an empty log. The removal goes on when ctx ends first
// (a client that gave up), its files with it.
func (d *daemon) removeAndForget(ctx context.Context, name string, opts program.RemoveOptions) error {
	spec, ok := d.mgr.Spec(name)
	if !ok || !spec.RemoveOnExit && opts.KeepLogs {
		return d.removeProgram(ctx, name)
	}
	done := make(chan error, 1)
	go func() {
		err := d.removeProgram(context.Background(), name)
		if err == nil || errors.Is(err, program.ErrNotFound) {
			d.sessions.removed(name, spec.Instances)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logHolds is what is known of one program's log files: the attached
// readers holding them, and whether the program was removed (its files
// then go with the last hold).
type logHolds struct {
	holds   int
	n       int           // instances whose files to remove
	gone    chan struct{} // closed once the program was removed
	removed bool
}

// entryLocked is name's logHolds, made if needed.
func (s *sessions) entryLocked(name string) *logHolds {
	e := s.logs[name]
	if e == nil {
		e = &logHolds{gone: make(chan struct{})}
		s.logs[name] = e
	}
	return e
}

// removed says a remove_on_exit program of n instances was removed: its
// log files go now, or with the last hold.
func (s *sessions) removed(name string, n int) {
	s.mu.Lock()
	e := s.entryLocked(name)
	if !e.removed {
		e.removed, e.n = true, n
		close(e.gone)
	}
	last := e.holds == 0
	if last {
		delete(s.logs, name)
	}
	s.mu.Unlock()
	if last {
		s.d.removeLogs(name, n)
	}
}

// removeLogs removes the log files of the instances 0..n-1 of program
// name, unless a program of that name has been added since (the files
// are its own now). Under reloadMu, so no add comes between the look and
// the removal.
func (d *daemon) removeLogs(name string, n int) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if _, ok := d.mgr.Spec(name); ok {
		return
	}
	for k := range n {
		if err := logfile.Remove(d.state.Logs, name+"-"+strconv.Itoa(k)); err != nil {
			d.note("removing the logs of %s: %v", program.InstanceID(name, k), err)
		}
	}
}

// hold keeps program name's logs until released (api.Backend.Hold).
func (s *sessions) hold(name string) api.Hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(name)
	e.holds++
	return &logHold{s: s, name: name, gone: e.gone}
}

// logHold is one api.Hold.
type logHold struct {
	s    *sessions
	name string
	gone chan struct{}
	once sync.Once
}

func (h *logHold) Removed() <-chan struct{} { return h.gone }

func (h *logHold) Release() { h.once.Do(func() { h.s.release(h.name) }) }

func (s *sessions) release(name string) {
	s.mu.Lock()
	e := s.logs[name]
	e.holds--
	last := e.holds == 0
	if last {
		delete(s.logs, name)
	}
	s.idle.Broadcast()
	s.mu.Unlock()
	if last && e.removed {
		s.d.removeLogs(name, e.n)
	}
}

// waitHolds waits until no reader holds the logs of names, at most for
// timeout.
func (s *sessions) waitHolds(names []string, timeout time.Duration) {
	done := make(chan struct{})
	t := time.AfterFunc(timeout, func() {
		s.mu.Lock()
		close(done)
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for slices.ContainsFunc(names, func(n string) bool { return s.logs[n] != nil && s.logs[n].holds > 0 }) {
		select {
		case <-done:
			return
		default:
		}
		s.idle.Wait()
	}
}

// transient says whether program name goes once it ends (remove_on_exit):
// its instances have no series of their own in the default scrape.
func (d *daemon) transient(name string) bool {
	spec, ok := d.mgr.Spec(name)
	return ok && spec.RemoveOnExit
}

// sessionSpecs are the remove_on_exit programs now, by name: their count.
func (d *daemon) sessionSpecs() map[string]int {
	out := map[string]int{}
	for _, spec := range d.mgr.Specs() {
		if spec.RemoveOnExit {
			out[spec.Name] = spec.Instances
		}
	}
	return out
}

// endSessions runs at a clean shutdown, once every instance has stopped:
// the remove_on_exit programs have ended (the shutdown stopped them), so
// they are forgotten and their logs removed, and the next tend up does not
// start them again.
func (d *daemon) endSessions(specs map[string]int, timeout time.Duration) {
	names := slices.Sorted(maps.Keys(specs))
	for _, name := range names {
		d.reloadMu.Lock()
		if _, err := d.kept.Forget(name); err != nil {
			d.note("forgetting %s in %s: %v", name, d.kept.Path(), err)
		}
		d.reloadMu.Unlock()
	}
	for _, name := range names {
		d.sessions.removed(name, specs[name]) // an attached reader finishes, then its logs go
	}
	d.sessions.waitHolds(names, timeout)
}

// dropEndedSessions takes out of the programs about to start the
// remove_on_exit ones none of whose runs is still alive: they ended while
// no daemon watched (it was killed, or the host went down), and are
// removed as they would have been, instead of being started again. Their
// cgroups go with the stale ones.
func (d *daemon) dropEndedSessions(specs []program.Spec) []program.Spec {
	alive := map[string]bool{}
	for _, r := range d.runs.Records() {
		if name, _, ok := program.SplitID(r.ID); ok {
			alive[name] = true
		}
	}
	return slices.DeleteFunc(specs, func(spec program.Spec) bool {
		if !spec.RemoveOnExit || alive[spec.Name] {
			return false
		}
		d.note("%s (remove_on_exit) ended while no daemon ran: removing it", spec.Name)
		d.reloadMu.Lock()
		_, err := d.kept.Forget(spec.Name)
		d.reloadMu.Unlock()
		if err != nil {
			d.note("forgetting %s in %s: %v", spec.Name, d.kept.Path(), err)
		}
		d.removeLogs(spec.Name, spec.Instances)
		return true
	})
}
