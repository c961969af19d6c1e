package supervisor

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
)

// Manager holds every program's instances and routes operator commands to
// them. It owns membership (which programs and instances exist); each
// instance owns its own state.
type Manager struct {
	deps   Deps
	forget func(id string) // drops an instance from the broker after it ended
	mem    *memWatch       // samples the runs of programs with max_rss; nil without Deps.Tree

	trackMu  sync.Mutex          // serialises tracked_changed, so the last one published is the current list
	trackIDs map[string]struct{} // the ids as last published; guarded by trackMu

	mu       sync.Mutex             // guards progs, closed, adopt, adopted, intents and starting
	progs    map[string]*group      // by program name
	starting []chan bool            // replies of AddAll's starts not yet waited for
	closed   bool                   // shutting down: no more additions
	adopt    map[string]Adoption    // runs of an earlier daemon not yet claimed, by instance id
	adopted  int                    // runs taken over
	intents  map[string]kept.Intent // the earlier daemon's intent record not yet claimed, by id
	carried  Carried                // what an upgrade handed over, not yet claimed
	// carriedRuns: runs taken over from the program this process was.
	carriedRuns int
}

// group is one program's instances.
type group struct {
	spec   *program.Spec
	digest string // kept.SpecDigest of spec (the same for every count)
	// configured is the instance count the program's config (or tend
	// add) gave, before any tend scale: kept with a scale, so that a
	// config whose count changed since wins over it.
	configured int
	insts      []*Instance
	// removing: the program is on its way out (tend rm, a reload, the
	// shutdown). It stays listed until its instances have stopped, which
	// an agent's turn may make take a while: its ids still answer (status,
	// logs, stop --now) and the shutdown still counts it.
	removing bool
}

// NewManager returns an empty Manager. forget is called with each instance's
// id once its goroutine has ended for good.
func NewManager(deps Deps, forget func(id string)) *Manager {
	m := &Manager{deps: deps, forget: forget, progs: map[string]*group{}}
	if deps.Tree != nil {
		m.mem = newMemWatch(deps.Tree)
	}
	return m
}

// Add registers a program, starts its instances if it autostarts, and
// returns their ids.
func (m *Manager) Add(spec program.Spec) ([]string, error) {
	ids, errs := m.AddAll([]program.Spec{spec})
	return ids, errs[0]
}

// AddAll registers programs together: one tracked_changed for all of them
// (a thousand programs at start-up must not publish a thousand growing id
// lists), then their starts. errs[i] is the error of specs[i]. The Manager
// keeps pointers into specs: the caller must not change them afterwards.
func (m *Manager) AddAll(specs []program.Spec) (ids []string, errs []error) {
	errs = make([]error, len(specs))
	var todo firsts
	m.mu.Lock()
	for i := range specs {
		spec := &specs[i] // kept, not copied: a thousand specs are a lot of memory
		if m.closed {
			errs[i] = program.ErrStopping
			continue
		}
		if _, ok := m.progs[spec.Name]; ok {
			errs[i] = fmt.Errorf("%w: %s", program.ErrExists, spec.Name)
			continue
		}
		g := &group{spec: m.scaledLocked(spec), digest: kept.SpecDigest(spec), configured: spec.Instances}
		todo.add(m.growLocked(g, g.spec.Instances))
		m.progs[spec.Name] = g
		for _, in := range g.insts {
			ids = append(ids, in.id)
		}
	}
	m.mu.Unlock()
	m.trackedChanged()
	// The starts run on the instances' goroutines, a few at a time: the
	// caller (the daemon's start, an API add) goes on, and a stop or tend
	// down is taken meanwhile. WaitStarted waits for them.
	replies := todo.send()
	m.mu.Lock()
	// Keep only the starts not yet carried out: after the fleet's start
	// nobody calls WaitStarted, and every program added over the API would
	// otherwise leave its reply here for good.
	m.starting = append(slices.DeleteFunc(m.starting, func(r chan bool) bool { return len(r) > 0 }), replies...)
	m.mu.Unlock()
	return ids, errs
}

// WaitStarted returns once every start AddAll has asked for so far has been
// carried out (the run spawned, or its spawn failed), or ctx ends.
func (m *Manager) WaitStarted(ctx context.Context) error {
	m.mu.Lock()
	pending := m.starting
	m.starting = nil
	m.mu.Unlock()
	for _, r := range pending {
		select {
		case <-r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// growLocked adds instances to g until it has n, each taking over its run
// from an earlier daemon and its intent record if there are, and returns
// what the new instances do first (their commands are the caller's to
// send, once it has let go of the lock).
func (m *Manager) growLocked(g *group, n int) firsts {
	var todo firsts
	for k := len(g.insts); k < n; k++ {
		in := newInstance(g.spec, g.digest, k, m.deps)
		if m.mem != nil && g.spec.MaxRSS > 0 {
			m.mem.add(in)
		}
		a, adopt := m.claimLocked(in.id)
		l, carried := m.claimLiveLocked(in.id)
		r, ok := m.claimIntentLocked(in.id)
		if adopt && !carried && ok && verdictCovers(r, g.digest, a.Run) {
			// runs.json still names the run whose end the policy judged
			// (the daemon died between the two writes): that end is
			// counted, and the verdict stands.
			adopt = false
			in.unrecorded = true // its record goes when the instance records none
		}
		over := false // its recorded run has ended: counted below, once restored
		if adopt && !carried {
			if in.adoptRun(a) {
				in.adopted = true
				m.adopted++
			} else {
				over, in.runs = true, a.Run
			}
		}
		first := in.restore(r, ok, in.adopted || over || carried && l.Run != nil)
		if in.unrecorded && !in.adopted && !over {
			in.record() // none: the run runs.json named is over
		}
		if over {
			first = in.endOver(a, first)
		}
		if carried { // an upgrade handed it over as it was: it goes on from there
			first = firstNothing
			if in.takeOver(l, m.carried.Take) {
				in.adopted = true
				m.carriedRuns++
			}
		}
		if in.adopted && in.cur != nil {
			in.attachProtocol() // with the session restored above
		}
		switch first {
		case firstStart:
			todo.starts = append(todo.starts, in)
		case firstStop:
			todo.stops = append(todo.stops, in)
		case firstRestart:
			todo.restarts = append(todo.restarts, in)
		}
		in.report() // the broker knows it before anyone can ask for it; its loop starts with the first command or exit
		in.letGo()
		g.insts = append(g.insts, in)
	}
	return todo
}

// Remove stops every instance of a program and forgets it, once they have
// stopped (also when ctx ends first: then in the background).
func (m *Manager) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	g, ok := m.progs[name]
	if ok {
		g.removing = true
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", program.ErrNotFound, name)
	}
	m.deps.Intents.Delete(name) // its scale goes with it
	return m.retire(ctx, g.insts, func() {
		m.mu.Lock()
		if m.progs[name] == g {
			delete(m.progs, name)
		}
		closed := m.closed
		m.mu.Unlock()
		if !closed { // a shutdown says it once, at the end, not once per program
			m.trackedChanged()
		}
	})
}

// retire stops and ends the instances and forgets them, then calls gone
// (may be nil). If ctx ends first they are still forgotten once they have
// stopped (a cancelled tend rm leaves no ghost in tend ps), and retire
// returns ctx's error.
func (m *Manager) retire(ctx context.Context, insts []*Instance, gone func()) error {
	sendAll(insts, cmdRemove, program.ActOptions{Wait: true})
	var pending []*Instance
	for _, in := range insts {
		select {
		case <-in.done:
			m.forgetInstance(in)
		case <-ctx.Done():
			pending = append(pending, in)
		}
	}
	if len(pending) == 0 {
		if gone != nil {
			gone()
		}
		return nil
	}
	go func() {
		for _, in := range pending {
			<-in.done
			m.forgetInstance(in)
		}
		if gone != nil {
			gone()
		}
	}()
	return ctx.Err()
}

func (m *Manager) forgetInstance(in *Instance) {
	if m.mem != nil {
		m.mem.remove(in)
	}
	m.deps.Intents.Delete(in.id)
	m.forget(in.id)
}

// Outcome is how an operator action went for one instance.
type Outcome struct {
	ID string
	// Err: the instance refused the command, which changed nothing (a
	// decision that could not be journaled, wrapping program.ErrNotKept).
	Err error
	// Done: the instance answered (with opts.Wait: it got somewhere); false
	// when ctx ended first.
	Done bool
	// OK: it got where it was asked (always, without Wait).
	OK bool
}

// Start starts the selected instances that are not running.
func (m *Manager) Start(ctx context.Context, sel string, opts program.ActOptions) ([]Outcome, error) {
	return m.act(ctx, sel, cmdStart, opts)
}

// Restart restarts the selected instances (an intentional restart: crash
// accounting untouched, immediate respawn).
func (m *Manager) Restart(ctx context.Context, sel string, opts program.ActOptions) ([]Outcome, error) {
	return m.act(ctx, sel, cmdRestart, opts)
}

// Stop stops the selected instances.
func (m *Manager) Stop(ctx context.Context, sel string, opts program.ActOptions) ([]Outcome, error) {
	return m.act(ctx, sel, cmdStop, opts)
}

// act sends an operator's command: each instance journals what it
// decides before it applies it, and refuses it (Outcome.Err) when it
// cannot. The error is the first refusal's, for a caller that answers
// the operator.
func (m *Manager) act(ctx context.Context, sel string, kind cmdKind, opts program.ActOptions) ([]Outcome, error) {
	insts, err := m.resolve(sel)
	if err != nil {
		return nil, err
	}
	refused := make([]error, len(insts))
	replies := make([]chan bool, len(insts))
	for i, in := range insts {
		replies[i] = make(chan bool, 1)
		in.putCmd(command{kind: kind, opts: opts, reply: replies[i], operator: true, refused: &refused[i]})
	}
	out := collect(ctx, insts, replies)
	n, first := 0, error(nil)
	for i := range out {
		if out[i].Done && refused[i] != nil { // set before the reply: read after it
			out[i].Err = refused[i]
			if n++; first == nil {
				first = refused[i]
			}
		}
	}
	if first != nil {
		return out, fmt.Errorf("%w (%d of %d instances refused, unchanged)", first, n, len(out))
	}
	return out, nil
}

// collect gathers the replies of insts until ctx ends.
func collect(ctx context.Context, insts []*Instance, replies []chan bool) []Outcome {
	out := make([]Outcome, len(insts))
	for i, in := range insts {
		out[i].ID = in.id
		select {
		case ok := <-replies[i]:
			out[i].Done, out[i].OK = true, ok
		case <-ctx.Done():
		}
	}
	return out
}

// resolve turns a selector into instances, sorted by id. A program scaled
// to zero has none: its bare name resolves to nothing, not to an error.
func (m *Manager) resolve(sel string) ([]*Instance, error) {
	s, err := program.ParseSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", program.ErrNotFound, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.All { // one program: a lookup, not a sort of ten thousand names
		if g, ok := m.progs[s.Program]; ok {
			switch {
			case s.Instance < 0:
				return slices.Clone(g.insts), nil
			case s.Instance < len(g.insts):
				return []*Instance{g.insts[s.Instance]}, nil
			}
		}
		return nil, fmt.Errorf("%w: %s", program.ErrNotFound, sel)
	}
	var out []*Instance
	for _, name := range m.namesLocked() {
		out = append(out, m.progs[name].insts...)
	}
	return out, nil
}

func (m *Manager) namesLocked() []string {
	names := make([]string, 0, len(m.progs))
	for n := range m.progs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Resolve lists the ids a selector names, sorted; an unknown program or
// instance wraps program.ErrNotFound.
func (m *Manager) Resolve(sel string) ([]string, error) {
	insts, err := m.resolve(sel)
	return idsOf(insts), err
}

// Scale grows or shrinks a program to n instances and returns its ids. Zero
// stops every instance and keeps the program, for a later Scale to start
// again.
func (m *Manager) Scale(ctx context.Context, name string, n int) ([]string, error) {
	if err := m.rescale(ctx, name, n, true); err != nil {
		return nil, err
	}
	return m.Resolve(name)
}

// IDs lists every instance id, sorted.
func (m *Manager) IDs() []string {
	insts, _ := m.resolve("all")
	return idsOf(insts)
}

// Specs returns the specs of every program, in name order.
func (m *Manager) Specs() []*program.Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*program.Spec, 0, len(m.progs))
	for _, name := range m.namesLocked() {
		out = append(out, m.progs[name].spec)
	}
	return out
}

// Spec returns the spec of a program.
func (m *Manager) Spec(name string) (*program.Spec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.progs[name]
	if !ok {
		return nil, false
	}
	return g.spec, true
}

// Diff is what Apply changed, by program name.
type Diff struct {
	Added, Removed, Changed, Unchanged []string
}

// Apply brings the running programs in line with specs (a reload): new ones
// start, missing ones stop and go, changed ones restart with their new spec,
// unchanged ones are left alone, and a change of instances alone adds or
// retires instances without touching the others. A program whose count the
// config did not change keeps a live tend scale (docs/daemon.md): the
// config's count is compared with the one it gave before, not with the
// scaled one.
func (m *Manager) Apply(ctx context.Context, specs []program.Spec) (Diff, error) {
	// Only what was there when the reload began can be removed by it: a
	// program added over the API meanwhile is not the reload's to judge.
	m.mu.Lock()
	names := m.namesLocked()
	m.mu.Unlock()
	var d Diff
	var added []program.Spec
	want := map[string]bool{}
	var wg sync.WaitGroup
	// One answer per spec (added or changed) and per program removed, so
	// that no sender waits: a reload must answer, whatever was removed.
	errs := make(chan error, len(specs)+len(names))
	for i := range specs {
		spec := specs[i]
		want[spec.Name] = true
		old, configured, ok := m.configuredOf(spec.Name)
		if ok && spec.Instances == configured {
			spec.Instances = old.Instances // the operator's scale stands
		}
		switch {
		case !ok:
			d.Added = append(d.Added, spec.Name)
			added = append(added, spec)
		case reflect.DeepEqual(*old, spec):
			d.Unchanged = append(d.Unchanged, spec.Name)
		case onlyInstancesDiffer(*old, spec):
			d.Changed = append(d.Changed, spec.Name)
			wg.Go(func() { errs <- m.rescale(ctx, spec.Name, spec.Instances, false) })
		default:
			d.Changed = append(d.Changed, spec.Name)
			wg.Go(func() { errs <- m.replace(ctx, spec, configured) })
		}
	}
	if _, addErrs := m.AddAll(added); len(added) > 0 {
		for _, err := range addErrs {
			errs <- err
		}
	}
	for _, name := range names {
		if !want[name] {
			d.Removed = append(d.Removed, name)
			wg.Go(func() { errs <- m.Remove(ctx, name) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

func onlyInstancesDiffer(a, b program.Spec) bool {
	a.Instances = b.Instances
	return reflect.DeepEqual(a, b)
}

// replace stops a program's instances and starts them again with spec.
func (m *Manager) replace(ctx context.Context, spec program.Spec, configured int) error {
	if err := m.Remove(ctx, spec.Name); err != nil {
		return err
	}
	if _, err := m.Add(spec); err != nil || spec.Instances == configured {
		return err
	}
	// A live tend scale carried over (Apply): it stays the operator's, kept
	// as such, and the config's count stays the one it was scaled from.
	m.mu.Lock()
	if g, ok := m.progs[spec.Name]; ok {
		g.configured = configured
	}
	m.mu.Unlock()
	m.keepScale(spec.Name, spec.Instances, configured)
	return nil
}

// configuredOf returns a program's spec and the instance count its config
// (or tend add) gave, before any tend scale.
func (m *Manager) configuredOf(name string) (*program.Spec, int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.progs[name]
	if !ok {
		return nil, 0, false
	}
	return g.spec, g.configured, true
}

// rescale grows or shrinks a program to n instances; the others run on.
// An operator's scale is kept in the intent record; a reload's (the
// config's count changed) makes the config's count the one to keep.
func (m *Manager) rescale(ctx context.Context, name string, n int, operator bool) error {
	m.mu.Lock()
	g, ok := m.progs[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", program.ErrNotFound, name)
	}
	if operator {
		if err := m.keepScale(name, n, g.configured); err != nil {
			m.mu.Unlock()
			return err // not journaled: not scaled
		}
	}
	spec := *g.spec
	spec.Instances = n
	g.spec = &spec // instances keep the spec they started with; only the count differs
	if !operator {
		g.configured = n
		m.deps.Intents.Delete(name)
	}
	var extra []*Instance
	var todo firsts
	if n < len(g.insts) {
		extra = slices.Clone(g.insts[n:])
		g.insts = g.insts[:n]
	} else {
		todo = m.growLocked(g, n)
	}
	m.mu.Unlock()
	collect(context.Background(), todo.starts, todo.send())
	return m.retire(ctx, extra, m.trackedChanged)
}

// Shutdown stops every instance and refuses further additions.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	names := m.namesLocked()
	m.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, name := range names {
		wg.Go(func() { errs <- m.Remove(ctx, name) })
	}
	wg.Wait()
	m.trackedChanged()
	if m.mem != nil {
		m.mem.close()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// trackedChanged publishes what changed in the id list since the last
// time, if anything did. The event carries the change, not the list: at
// 10,000 instances the whole list is ~150 KB of audit log per add
// (docs/events.md).
func (m *Manager) trackedChanged() {
	m.trackMu.Lock()
	defer m.trackMu.Unlock()
	ids := m.IDs()
	now := make(map[string]struct{}, len(ids))
	added := []string{}
	for _, id := range ids {
		now[id] = struct{}{}
		if _, ok := m.trackIDs[id]; !ok {
			added = append(added, id)
		}
	}
	removed := []string{}
	for id := range m.trackIDs {
		if _, ok := now[id]; !ok {
			removed = append(removed, id)
		}
	}
	if m.trackIDs != nil && len(added) == 0 && len(removed) == 0 {
		return
	}
	slices.SortFunc(removed, program.CompareIDs)
	m.trackIDs = now
	m.deps.Publish(program.Event{Kind: program.KindTrackedChanged,
		Data: &program.TrackedChanged{Added: added, Removed: removed, Count: len(ids)}})
}

// sendAll sends kind to every instance and returns the reply channels.
func sendAll(insts []*Instance, kind cmdKind, opts program.ActOptions) []chan bool {
	replies := make([]chan bool, len(insts))
	for i, in := range insts {
		replies[i] = make(chan bool, 1)
		in.putCmd(command{kind: kind, opts: opts, reply: replies[i]})
	}
	return replies
}

func idsOf(insts []*Instance) []string {
	ids := make([]string, len(insts))
	for i, in := range insts {
		ids[i] = in.id
	}
	return ids
}
